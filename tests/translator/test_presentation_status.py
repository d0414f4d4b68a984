"""A kernel's and an execution's status as a person or the model reads it, table-driven:
`status`, the setup's report, and the notes on installed setup and replaced kernels."""

from __future__ import annotations

import time

import pytest

from loomgate.shared import wire
from loomgate.translator.presentation import (
    attached_note,
    installed_note,
    kernel_label,
    render_execution_status,
    render_jupyter_server,
    render_kernel,
    render_kernels,
    render_prewarmed,
    render_setup,
    replaced_note,
    serving,
    several_kernels,
    started_note,
    stop_needs_force,
)
from tests.support.wire_values import execution, kernel, sandbox

STATUS = [
    (
        "a quiet completed cell",
        execution(),
        ["In [5]: completed, elapsed 1.2 s", "streams: no output", "code:", "  x"],
    ),
    (
        "a running cell says how long it has been silent",
        execution(state="running", elapsed=75, silent_for=12.5, code="train()"),
        [
            "In [5]: running, elapsed 1 min 15 s, silent for 12 s",
            "streams: no output",
            "code:",
            "  train()",
        ],
    ),
    (
        "a cell waiting for input is running too",
        execution(state="awaiting_input", elapsed=3, silent_for=0.25),
        [
            "In [5]: awaiting_input, elapsed 3.0 s, silent for 250 ms",
            "streams: no output",
            "code:",
            "  x",
        ],
    ),
    (
        "an error names the exception; only streams with lines are listed",
        execution(
            state="error",
            error={"name": "ValueError", "value": "bad"},
            streams={
                "stdout": {"lines": 1200, "bytes": 9000},
                "stderr": {"lines": 0, "bytes": 0},
                "traceback": {"lines": 4, "bytes": 120},
            },
        ),
        [
            "In [5]: error, elapsed 1.2 s",
            "error: ValueError: bad",
            "streams: stdout 1,200 lines, traceback 4 lines",
            "code:",
            "  x",
        ],
    ),
    (
        "a killed cell gives the reason",
        execution(state="killed", note="the kernel was restarted"),
        [
            "In [5]: killed, elapsed 1.2 s",
            "killed: the kernel was restarted",
            "streams: no output",
            "code:",
            "  x",
        ],
    ),
    (
        "unstored output, gaps and rich outputs are all reported",
        execution(
            unstored={"reason": "disk full", "from_line": 3000},
            gaps=[{"after_line": 7, "since": 10.0, "until": 14.0}],
            rich=[
                {"index": 0, "line": 1, "mimetypes": ["image/png"], "bytes": 9, "result": False},
                {"index": 1, "line": 2, "mimetypes": ["text/html"], "bytes": 9, "result": True},
            ],
        ),
        [
            "In [5]: completed, elapsed 1.2 s",
            "streams: no output",
            "[output from line 3,000 on was not stored: disk full; the gateway's state dir "
            "needs space or write permission]",
            "[output after line 7 may be missing: no gateway listened for 4.0 s (it was down, "
            "then took the kernel back)]",
            "rich outputs: 2",
            "code:",
            "  x",
        ],
    ),
    (
        "empty code still shows an indented line",
        execution(code=""),
        ["In [5]: completed, elapsed 1.2 s", "streams: no output", "code:", "  "],
    ),
    (
        "code of 20 lines is shown whole",
        execution(code="\n".join(f"line {i}" for i in range(1, 21))),
        [
            "In [5]: completed, elapsed 1.2 s",
            "streams: no output",
            "code:",
            *(f"  line {i}" for i in range(1, 21)),
        ],
    ),
    (
        "longer code is cut at 20 lines, saying how many more",
        execution(code="\n".join(f"line {i}" for i in range(1, 24))),
        [
            "In [5]: completed, elapsed 1.2 s",
            "streams: no output",
            "code:",
            *(f"  line {i}" for i in range(1, 21)),
            "  … 3 more lines",
        ],
    ),
]


@pytest.mark.parametrize(("case", "record", "expected"), STATUS, ids=[c[0] for c in STATUS])
def test_an_executions_status(case: str, record: wire.Execution, expected: list[str]) -> None:
    assert render_execution_status(record).split("\n") == expected


KERNELS = [
    (
        "a fresh kernel",
        kernel(executions=0, last_execution=None),
        [
            "Kernel lab [cccccccc] on local: idle, persistent, python3",
            "executions: 0",
            "sandbox: not sandboxed by loomgate",
        ],
    ),
    (
        "a busy unnamed kernel of unknown spec, with a cwd and connections",
        kernel(
            name=None,
            kernel_spec="",
            state="busy",
            current_execution=3,
            last_execution=3,
            executions=3,
            cwd="/work",
            connections=2,
        ),
        [
            "Kernel (unnamed) [cccccccc] on local: busy, persistent, ?",
            "executions: 3 (latest In [3])",
            "running: In [3]",
            "cwd: /work",
            "sandbox: not sandboxed by loomgate",
        ],
    ),
    (
        "an unconfined kernel's packages dir, where pip installs",
        kernel(
            sandbox=sandbox(
                profile="none",
                writable=[],
                hidden=[],
                mechanism="",
                packages="/tmp/loomgate-1000/0123456789abc/packages",
            )
        ),
        [
            "Kernel lab [cccccccc] on local: idle, persistent, python3",
            "executions: 2 (latest In [2])",
            "sandbox: none (not confined)",
            "packages: /tmp/loomgate-1000/0123456789abc/packages (%pip and !pip install here; "
            "first on sys.path, kept until the kernel is stopped)",
        ],
    ),
]


@pytest.mark.parametrize(("case", "model", "first_lines"), KERNELS, ids=[c[0] for c in KERNELS])
def test_a_kernels_summary(case: str, model: wire.Kernel, first_lines: list[str]) -> None:
    shown = render_kernel(model, gateway="local").split("\n")
    assert shown == [*first_lines, f"connections: {model['connections']}"]


def result(name: str, state: wire.SetupState, output: str = "", failure: str | None = None):
    """Return how one setup part ran."""
    return wire.SetupResult(name=name, state=state, output=output, failure=failure)


SETUPS = [
    ("nothing to say", [result("startup.py", "ok")], True, ""),
    (
        "what a part printed",
        [result("startup.py", "ok", "hello\nthere")],
        True,
        "startup.py output:\nhello\nthere",
    ),
    ("printed output left out", [result("startup.py", "ok", "hello")], False, ""),
    (
        "startup.py failing leaves the kernel usable",
        [result("startup.py", "failed", "", "Traceback\nNameError: x")],
        True,
        "startup.py failed; the kernel is usable without it:\nTraceback\nNameError: x",
    ),
    (
        "inspectors.py failing leaves cells unchecked",
        [result("inspectors.py", "failed", "", "SyntaxError")],
        True,
        "inspectors.py failed; no inspector checks this kernel's cells:\nSyntaxError",
    ),
    (
        "another part failing, without a traceback",
        [result("extra", "failed")],
        True,
        "extra failed:\n",
    ),
    (
        "a failure is said even when outputs are not",
        [result("extra", "failed", "printed", "boom")],
        False,
        "extra failed:\nboom",
    ),
    (
        "a part still running",
        [result("startup.py", "unfinished", "", "still running after 30 s")],
        True,
        "startup.py is still running after 30 s",
    ),
    (
        "one part's output, then another's failure",
        [result("startup.py", "ok", "one"), result("inspectors.py", "failed", "", "boom")],
        True,
        "startup.py output:\none\ninspectors.py failed; no inspector checks this kernel's "
        "cells:\nboom",
    ),
    (
        "several parts in order",
        [result("startup.py", "ok", "one"), result("inspectors.py", "ok", "two")],
        True,
        "startup.py output:\none\ninspectors.py output:\ntwo",
    ),
]


@pytest.mark.parametrize(
    ("case", "results", "outputs", "expected"), SETUPS, ids=[c[0] for c in SETUPS]
)
def test_a_setups_report(
    case: str, results: list[wire.SetupResult], outputs: bool, expected: str
) -> None:
    assert render_setup(results, outputs=outputs) == expected


def test_a_setups_report_shows_outputs_by_default() -> None:
    assert render_setup([result("startup.py", "ok", "hi")]) == "startup.py output:\nhi"


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        (["startup.py"], "Installed startup.py in this kernel; it runs again after every restart."),
        (
            ["startup.py", "inspectors.py"],
            "Installed startup.py and inspectors.py in this kernel; they run again after every "
            "restart.",
        ),
    ],
)
def test_installed_setup_is_noted(parts: list[str], expected: str) -> None:
    assert installed_note(parts) == expected


@pytest.mark.parametrize(
    ("executions", "records"),
    [(1, "1 execution stays"), (2, "2 executions stay"), (1234, "1,234 executions stay")],
)
def test_a_replaced_kernels_records_stay_readable(executions: int, records: str) -> None:
    gone = kernel(id="0123456789-ab", name="lab", executions=executions)
    assert replaced_note(gone) == (
        f"The earlier kernel named lab (01234567) was stopped; its {records} readable: "
        "read_output(kernel='01234567', execution=N) or search_output(kernel='01234567', …)."
    )


def test_a_started_kernel_is_noted() -> None:
    assert started_note("lab") == (
        "Started a persistent kernel named lab: --kernel named no running kernel."
    )


@pytest.mark.parametrize(
    ("paths", "expected"),
    [([], ""), (["a.ipynb"], " serving a.ipynb"), (["a.ipynb", "b"], " serving a.ipynb, b")],
)
def test_a_kernel_serving_notebooks(paths: list[str], expected: str) -> None:
    assert serving(kernel(paths=paths)) == expected


@pytest.mark.parametrize(("name", "label"), [("lab", "lab"), (None, "cccccccc"), ("", "cccccccc")])
def test_a_kernels_label(name: str | None, label: str) -> None:
    assert kernel_label(kernel(name=name)) == label


def test_an_attached_kernel_says_since_when_in_local_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        note = attached_note(kernel(attached=1_800_000_000.0))
    finally:
        monkeypatch.undo()
        time.tzset()
    assert note == (
        "Someone else started this kernel on the upstream; loomgate records it since "
        "2027-01-15 08:00 (earlier cells have no records; the In [N] numbering is the kernel's)."
    )


def test_a_kernel_table_shows_notebooks_and_unknown_specs() -> None:
    kernels = [
        kernel(id="aaaaaaaa-1", kernel_spec="", paths=["a.ipynb", "b.ipynb"]),
        kernel(id="bbbbbbbb-2", name="other", paths=[]),
    ]
    assert render_kernels(kernels, None, "local", now=0.0).split("\n") == [
        "Kernels on local:",
        "  name   id        spec     state  lifetime    runs  idle  conn  notebook",
        "  lab    aaaaaaaa  -        idle   persistent  2     -     0     a.ipynb, b.ipynb",
        "  other  bbbbbbbb  python3  idle   persistent  2     -     0     -",
    ]


def test_a_kernel_table_counts_idle_time_from_now() -> None:
    recent = kernel(last_activity=time.time() - 2 * 3600)
    [_, _, row] = render_kernels([recent], None, "local").split("\n")
    assert "  2 h 0 min  " in row


def test_a_jupyter_server_without_a_problem_lists_its_kernels() -> None:
    text = render_jupyter_server("jupyter:8888", "http://h:8888", "", [kernel()], None)
    assert text.split("\n")[0] == "Kernels on Jupyter server jupyter:8888 at http://h:8888:"
    assert render_jupyter_server("jupyter:8888", "http://h:8888", "", [], None) == (
        "Jupyter server jupyter:8888 at http://h:8888: no kernels."
    )


def test_a_kernel_named_like_the_heading_keeps_its_name() -> None:
    named = kernel(name="Kernels on j:", paths=["Kernels on j:"])
    text = render_jupyter_server("j", "http://h:1", "", [named], None)
    assert text.split("\n")[0] == "Kernels on Jupyter server j at http://h:1:"
    assert text.count("Kernels on j:") == 2


def test_prewarmed_memory_is_in_megabytes_of_a_million_bytes() -> None:
    about = wire.Info(  # type: ignore[typeddict-item]
        prewarm=1,
        prewarmed=[
            wire.PooledKernel(
                kernel_spec="python3",
                sandbox="none",
                cwd=None,
                pid=7,
                rss_bytes=100_500_050,
                launched_pid=7,
            )
        ],
    )
    assert render_prewarmed(about).split("\n")[1] == "  python3, none, any directory: pid 7, 101 MB"


def test_a_notebook_on_several_servers_lists_each_kernels_notebooks() -> None:
    matches = [("jupyter:8888", kernel(paths=["a.ipynb", "b.ipynb"]))]
    assert several_kernels("a.ipynb", matches, "model") == (
        "'a.ipynb' names kernels on several Jupyter servers: lab on jupyter:8888 "
        "(a.ipynb, b.ipynb); pass gateway= to choose one"
    )


def test_stopping_an_unnamed_kernel_of_several_notebooks_needs_force() -> None:
    model = kernel(id="0123456789-ab", name=None, paths=["a.ipynb", "b.ipynb"])
    assert stop_needs_force(model, "0123") == (
        "kernel 01234567 serves a.ipynb, b.ipynb, open in a person's Jupyter; stopping it ends "
        "their session and variables. Call stop_kernel(kernel='0123', force=true) if that is "
        "what is wanted"
    )
