"""What loomgate sends a kernel beyond its cells, decided from its kernel_info reply."""

from __future__ import annotations

import pytest

from loomgate.gateway.kernels.kernel_kind import KernelKind
from loomgate.shared import wire


def reply(name: str | None, implementation: str | None, extension: str | None) -> dict[str, object]:
    """Return a kernel_info reply's content as a kernel of this kind sends it."""
    info = {"name": name, "file_extension": extension} if name is not None else None
    return {"implementation": implementation, "language_info": info}


# What each kernel we run said of itself (checked with jupyter_client, 2026-12-07).
KINDS = {
    "ipykernel": reply("python", "ipython", ".py"),
    "ipymini": reply("python", "ipymini", ".py"),
    "xeus-python": reply("python", "xeus-python", ".py"),
    "bash_kernel": reply("bash", "bash_kernel", ".sh"),
    "deno": reply("typescript", "Deno kernel", ".ts"),
    "an unknown python kernel": reply("Python", "pythonish", ".py"),
    "nothing said": {},
}


@pytest.mark.parametrize(
    ("kernel", "python", "ipython", "ipykernel"),
    [
        ("ipykernel", True, True, True),
        ("ipymini", True, True, False),
        ("xeus-python", True, True, False),
        ("bash_kernel", False, False, False),
        ("deno", False, False, False),
        ("an unknown python kernel", True, False, False),
        ("nothing said", False, False, False),
    ],
)
def test_what_a_kernel_is_sent_follows_its_kernel_info(
    kernel: str, python: bool, ipython: bool, ipykernel: bool
) -> None:
    kind = KernelKind.of(KINDS[kernel])
    assert (kind.python, kind.ipython, kind.ipykernel) == (python, ipython, ipykernel)
    assert kind.known is (kernel != "nothing said")


STARTUP = wire.SetupPart(name="startup.py", code="x = 1")
INSPECTORS = wire.SetupPart(name="inspectors.py", code="…", runs_in="ipython")
BASH = wire.SetupPart(name="startup.sh", code="export X=1", runs_in=".sh")
TYPESCRIPT = wire.SetupPart(name="startup.ts", code="const x = 1", runs_in=".ts")


@pytest.mark.parametrize(
    ("kernel", "runs"),
    [
        ("ipykernel", {"startup.py", "inspectors.py"}),
        ("ipymini", {"startup.py", "inspectors.py"}),
        ("xeus-python", {"startup.py", "inspectors.py"}),
        ("bash_kernel", {"startup.sh"}),
        ("deno", {"startup.ts"}),
        ("an unknown python kernel", set()),
        ("nothing said", set()),
    ],
)
def test_each_kernel_runs_the_setup_parts_of_its_kind(kernel: str, runs: set[str]) -> None:
    kind = KernelKind.of(KINDS[kernel])
    parts = (STARTUP, INSPECTORS, BASH, TYPESCRIPT)
    assert {part["name"] for part in parts if kind.runs(part)} == runs


def test_a_skipped_part_says_why_in_one_sentence() -> None:
    kind = KernelKind.of(KINDS["bash_kernel"])
    assert kind.skipped(INSPECTORS) == (
        "inspectors.py runs in IPython kernels; this kernel is bash (bash_kernel)"
    )
    assert KernelKind.of(KINDS["deno"]).skipped(BASH) == (
        "startup.sh runs in .sh kernels; this kernel is typescript (Deno kernel)"
    )
    assert KernelKind().describe() == "of an unknown language"


@pytest.mark.parametrize(
    ("kernel", "interrupts"),
    [
        ("ipykernel", True),
        ("ipymini", True),
        ("bash_kernel", True),
        ("xeus-python", False),
        ("deno", False),
    ],
)
def test_an_interrupt_goes_only_to_a_kernel_that_lives_on_after_it(
    kernel: str, interrupts: bool
) -> None:
    assert KernelKind.of(KINDS[kernel]).interrupts is interrupts


def test_what_a_kernel_does_not_say_stays_empty() -> None:
    kind = KernelKind.of({"language_info": {"name": "R"}})
    assert (kind.language, kind.implementation, kind.file_extension) == ("r", "", "")


def test_a_part_that_names_no_kernel_is_for_ipython_shells() -> None:
    kind = KernelKind.of(KINDS["bash_kernel"])
    assert kind.skipped(STARTUP) == (
        "startup.py runs in IPython kernels; this kernel is bash (bash_kernel)"
    )
