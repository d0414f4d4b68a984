"""A cell as the model reads it, at the edges, table-driven: durations at their thresholds, how
a cell ended, images and their stand-ins, results in head and tail, and a cell still running."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.shared import wire
from loomgate.translator.output_view import CellOutput, Image, OutputLimits
from loomgate.translator.presentation import (
    Audience,
    format_elapsed,
    gap_note,
    render_cell,
    render_running,
)
from tests.support.wire_values import execution, lines


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-0.5, "0 ms"),
        (0.0001, "0 ms"),
        (0.9, "900 ms"),
        (1.0, "1.0 s"),
        (9.94, "9.9 s"),
        (10.0, "10 s"),
        (10.7, "11 s"),
        (59.4, "59 s"),
        (60.0, "1 min 0 s"),
        (60.4, "1 min 0 s"),
        (3599, "59 min 59 s"),
        (3600, "1 h 0 min"),
        (3660, "1 h 1 min"),
        (90_000, "25 h 0 min"),
    ],
)
def test_a_duration_at_each_threshold(seconds: float, text: str) -> None:
    assert format_elapsed(seconds) == text


HEADERS = [
    ("killed with a reason", {"state": "killed", "note": "out of memory"}, "killed: out of memory"),
    ("killed", {"state": "killed"}, "killed"),
    (
        "lost with a reason",
        {"state": "lost", "note": "the gateway lost it"},
        "lost: the gateway lost it",
    ),
    ("lost", {"state": "lost"}, "lost"),
    (
        "died, not restarted",
        {"state": "died", "died": {"reason": "killed by signal 9", "restarted": False}},
        "died: killed by signal 9; the kernel is dead",
    ),
    ("died, nothing known", {"state": "died"}, "died: the kernel process died; the kernel is dead"),
    ("an error", {"state": "error"}, ""),
    ("an error with a note on how its end was seen", {"state": "error", "note": "x"}, "x"),
    ("a completed cell", {}, ""),
    (
        "a completed cell whose end was missed",
        {"note": "the gateway missed the cell's end"},
        "the gateway missed the cell's end",
    ),
]


@pytest.mark.parametrize(("case", "fields", "note"), HEADERS, ids=[c[0] for c in HEADERS])
def test_a_cells_header_says_how_it_ended(case: str, fields: dict[str, Any], note: str) -> None:
    [text] = render_cell(execution(**fields), CellOutput((), (), 0))
    assert text == (f"In [5] (1.2 s, {note}):" if note else "In [5] (1.2 s):")


RICH = [
    (
        "a rich output with no image shows its text",
        [{"index": 0, "line": 1, "mimetypes": ["text/html", "text/plain"]}],
        lines(("+rich", "<table>")),
        ["In [5] (1.2 s):\n<table>"],
    ),
    (
        "its text keeps the clipped note",
        [{"index": 0, "line": 1, "mimetypes": ["text/html"]}],
        [{"n": 1, "text": "<table>", "kind": "rich", "start": True, "clipped": 1200}],
        ["In [5] (1.2 s):\n<table> …[+1,200 chars]"],
    ),
    (
        "a rich line the execution does not list shows its text",
        [],
        lines(("+rich", "<Figure>")),
        ["In [5] (1.2 s):\n<Figure>"],
    ),
    (
        "a JPEG is an image",
        [{"index": 3, "line": 1, "mimetypes": ["text/plain", "image/jpeg"]}],
        lines(("+rich", "<Figure>")),
        ["In [5] (1.2 s):", Image(5, 3, "image/jpeg")],
    ),
    (
        "the first image type listed is shown",
        [{"index": 0, "line": 1, "mimetypes": ["image/jpeg", "image/png"]}],
        lines(("+rich", "<Figure>")),
        ["In [5] (1.2 s):", Image(5, 0, "image/jpeg")],
    ),
]


@pytest.mark.parametrize(("case", "rich", "shown", "expected"), RICH, ids=[c[0] for c in RICH])
def test_rich_outputs_in_place(
    case: str, rich: list[dict[str, Any]], shown: list[dict[str, Any]], expected: list[Any]
) -> None:
    assert render_cell(execution(rich=rich), CellOutput(shown, [], len(shown))) == expected


HEAD_AND_TAIL = [
    (
        "a multi-line result in the head, a tail after it",
        lines(("+result", "a"), ("result", "b")),
        lines("z", start=3),
        3,
        ["In [5] (1.2 s):", "Out[5]:", "a", "b", "z"],
    ),
    (
        "a result after other output",
        lines("x", ("+result", "a"), ("result", "b"), "y"),
        [],
        4,
        ["In [5] (1.2 s):", "x", "Out[5]:", "a", "b", "y"],
    ),
    (
        "two results, each labelled",
        lines(("+result", "1"), ("+result", "2")),
        [],
        2,
        ["In [5] (1.2 s):", "Out[5]: 1", "Out[5]: 2"],
    ),
    (
        "head and tail that meet omit nothing",
        lines("a"),
        lines("b", start=2),
        2,
        ["In [5] (1.2 s):", "a", "b"],
    ),
    (
        "only a tail known",
        [],
        lines("y", "z", start=5),
        6,
        [
            "In [5] (1.2 s):",
            '… 4 lines omitted (1–4 of 6); read_output(execution=5, lines="1:4") shows them …',
            "y",
            "z",
        ],
    ),
    (
        "nothing known of many lines",
        [],
        [],
        3,
        [
            "In [5] (1.2 s):",
            '… 3 lines omitted (1–3 of 3); read_output(execution=5, lines="1:3") shows them …',
        ],
    ),
]


@pytest.mark.parametrize(
    ("case", "head", "tail", "total", "expected"),
    HEAD_AND_TAIL,
    ids=[c[0] for c in HEAD_AND_TAIL],
)
def test_head_and_tail(
    case: str,
    head: list[dict[str, Any]],
    tail: list[dict[str, Any]],
    total: int,
    expected: list[str],
) -> None:
    [text] = render_cell(execution(), CellOutput(head, tail, total))
    assert text.split("\n") == expected


@pytest.mark.parametrize(
    ("audience", "call"),
    [
        ("model", 'read_output(execution=5, lines="2:9")'),
        ("person", "`loomgate output 5 --lines 2:9`"),
    ],
)
def test_the_omission_between_head_and_tail_names_the_readers_call(
    audience: Audience, call: str
) -> None:
    output = CellOutput(lines("a"), lines("z", start=10), 10)
    [text] = render_cell(execution(), output, OutputLimits(), audience)
    assert text.split("\n")[2] == f"… 8 lines omitted (2–9 of 10); {call} shows them …"


RUNNING = [
    (
        "waiting for a password",
        execution(state="awaiting_input", elapsed=4, input={"prompt": "pw: ", "password": True}),
        [],
        [
            "In [5] is waiting for a password (4.0 s): 'pw: '",
            "No output yet.",
            'Answer with send_input(value="…", execution=5), or interrupt().',
        ],
    ),
    (
        "running: a stale input request does not count",
        execution(state="running", elapsed=4, input={"prompt": "x", "password": False}),
        [],
        [
            "In [5] is still running (4.0 s).",
            "No output yet.",
            "It keeps running. wait(execution=5) waits more; read_output and search_output look "
            "at its output; interrupt() stops it.",
        ],
    ),
    (
        "the last ten lines, unstored output and gaps",
        execution(
            state="running",
            elapsed=30,
            unstored={"reason": "disk full", "from_line": 12},
            gaps=[{"after_line": 3, "since": 0.0, "until": 0.5}],
        ),
        [*lines(*[f"row {i}" for i in range(1, 12)]), {"n": 12, "text": "cut", "clipped": 5}],
        [
            "In [5] is still running (30 s).",
            "Last lines:",
            *(f"row {i}" for i in range(3, 12)),
            "cut …[+5 chars]",
            "[output from line 12 on was not stored: disk full; the gateway's state dir needs "
            "space or write permission]",
            "[output after line 3 may be missing: no gateway listened for 500 ms (it was down, "
            "then took the kernel back)]",
            "It keeps running. wait(execution=5) waits more; read_output and search_output look "
            "at its output; interrupt() stops it.",
        ],
    ),
]


@pytest.mark.parametrize(
    ("case", "record", "last", "expected"), RUNNING, ids=[c[0] for c in RUNNING]
)
def test_a_cell_still_running(
    case: str, record: wire.Execution, last: list[dict[str, Any]], expected: list[str]
) -> None:
    assert render_running(record, last).split("\n") == expected


def test_a_cells_header_names_its_kernels_language_when_asked() -> None:
    [text] = render_cell(execution(), CellOutput((), (), 0), language="bash")
    assert text == "In [5] (bash, 1.2 s):"
    [stopped] = render_cell(execution(state="killed"), CellOutput((), (), 0), language="bash")
    assert stopped.startswith("In [5] (bash, 1.2 s, ")
    running = render_running(execution(state="running", elapsed=30), [], language="typescript")
    assert running.split("\n")[0] == "In [5] is still running (typescript, 30 s)."


def test_output_the_kernel_dropped_is_said_where_it_would_have_been() -> None:
    gap = wire.Gap(after_line=5962, since=0.0, until=0.1, dropped=9067)
    assert gap_note(gap) == (
        "[output after line 5,962 may be missing: the kernel dropped 9,067 messages it could "
        "not send fast enough]"
    )


def test_output_an_upstream_held_back_is_said_with_the_setting_to_change() -> None:
    gap = wire.Gap(after_line=1500, since=0.0, until=0.1, dropped=0, by="upstream")
    assert gap_note(gap) == (
        "[output after line 1,500 may be missing: the upstream server held some back (its "
        "IOPub rate limit: ServerApp.iopub_msg_rate_limit there)]"
    )
