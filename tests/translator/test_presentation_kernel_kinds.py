"""What the model and the person read of a kernel of another language: its setup parts skipped,
an error without a name, a refused kernel, and where the cells go after a failed connect."""

from __future__ import annotations

import pytest

from loomgate.shared import wire
from loomgate.translator.presentation import (
    gap_note,
    render_setup,
    still_on_note,
    uninspected_refusal,
)
from loomgate.translator.presentation.cells import error_words
from tests.support.wire_values import kernel

INSPECTORS_SKIPPED = wire.SetupResult(
    name="inspectors.py",
    state="skipped",
    output="",
    failure="inspectors.py runs in IPython kernels; this kernel is bash (bash_kernel)",
)
STARTUP_SKIPPED = wire.SetupResult(
    name="startup.py",
    state="skipped",
    output="",
    failure="startup.py runs in IPython kernels; this kernel is bash (bash_kernel)",
)
OTHER_SKIPPED = wire.SetupResult(
    name="startup.ts", state="skipped", output="", failure="startup.ts runs in .ts kernels; …"
)
OWN_RAN = wire.SetupResult(name="startup.sh", state="ok", output="", failure=None)
PY_RAN = wire.SetupResult(name="startup.py", state="ok", output="", failure=None)
OWN_FAILED = wire.SetupResult(name="startup.sh", state="failed", output="", failure="boom")


@pytest.mark.parametrize(
    ("results", "said"),
    [
        ([INSPECTORS_SKIPPED], [
            "This kernel's cells are not inspected: inspectors.py runs in IPython kernels; "
            "this kernel is bash (bash_kernel).",
        ]),
        ([STARTUP_SKIPPED], [
            "startup.py did not run: startup.py runs in IPython kernels; this kernel is bash "
            "(bash_kernel).",
        ]),
        # The kernel ran its own language's startup file: startup.py's skip is no news.
        ([STARTUP_SKIPPED, OWN_RAN], []),
        ([STARTUP_SKIPPED, OWN_FAILED], ["startup.sh failed:", "boom"]),
        # Another language's startup file skipped, and startup.py ran: nothing to say.
        ([OTHER_SKIPPED], []),
        ([PY_RAN, OTHER_SKIPPED], []),
    ],
)  # fmt: skip
def test_a_skipped_setup_part_is_said_only_when_it_matters(
    results: list[wire.SetupResult], said: list[str]
) -> None:
    assert render_setup(results).split("\n") == (said or [""])


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("ZeroDivisionError", "division by zero", "ZeroDivisionError: division by zero"),
        ("", "2", "2 (the kernel named no error)"),
        ("KeyboardInterrupt", "", "KeyboardInterrupt"),
        ("", "", "(the kernel gave no name and no value)"),
    ],
)
def test_an_error_reads_as_its_name_and_value(name: str, value: str, words: str) -> None:
    assert error_words(wire.ErrorInfo(name=name, value=value)) == words


def test_one_dropped_message_is_one() -> None:
    gap = wire.Gap(after_line=3, since=0.0, until=0.1, dropped=1, by="kernel")
    assert gap_note(gap) == (
        "[output after line 3 may be missing: the kernel dropped 1 message it could not send "
        "fast enough]"
    )


def test_a_refused_kernel_says_why_and_what_became_of_it() -> None:
    refused = "inspectors.py is required, and inspectors.py runs in IPython kernels"
    assert uninspected_refusal(refused, stopped=True) == (
        f"{refused}: LOOMGATE_UNINSPECTED=refuse refuses kernels whose cells would not be "
        "inspected; the kernel started for this was stopped"
    )
    assert uninspected_refusal(refused, stopped=False) == (
        f"{refused}: LOOMGATE_UNINSPECTED=refuse refuses kernels whose cells would not be inspected"
    )


def test_a_failed_connect_says_where_the_cells_go() -> None:
    bound = kernel(name="lab", language="bash")
    assert still_on_note(bound) == "this conversation's cells still go to kernel lab (bash)"
    unknown = kernel(name="lab", language="")
    assert still_on_note(unknown) == "this conversation's cells still go to kernel lab"
    assert still_on_note(None) == (
        "no kernel is connected: the next run_cell starts one of the gateway's default kernel spec"
    )
