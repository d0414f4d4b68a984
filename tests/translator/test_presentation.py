"""What the model reads, table-driven: cells, head/tail, Out[N], images, reads, searches."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest

from loomgate.shared import wire
from loomgate.translator.output_view import CellOutput, Image, OutputLimits, SearchPage, leading
from loomgate.translator.presentation import (
    Audience,
    attached_note,
    connected_note,
    format_elapsed,
    image_over_count,
    image_over_size,
    input_dialog_message,
    kernel_gone_refusal,
    no_notebook_kernel,
    nothing_run_yet,
    nothing_to_interrupt,
    progress_message,
    render_cell,
    render_jupyter_server,
    render_kernel,
    render_kernels,
    render_prewarmed,
    render_read,
    render_running,
    render_search,
    render_unattached,
    reset_note,
    search_scope,
    several_kernels,
    shared_kernel_note,
    stop_needs_force,
    stopped_kernel_refusal,
    stopped_note,
    unexpected_failure,
)
from tests.support.wire_values import execution, kernel, lines, read


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0123, "12 ms"),
        (0.9994, "999 ms"),
        (1.23, "1.2 s"),
        (42.4, "42 s"),
        (185, "3 min 5 s"),
        (7620, "2 h 7 min"),
    ],
)
def test_format_elapsed(seconds: float, text: str) -> None:
    assert format_elapsed(seconds) == text


CELLS = [
    ("silent", execution(), [], ["In [5] (1.2 s):"]),
    (
        "output then result",
        execution(),
        lines("loading", ("+result", "42")),
        ["In [5] (1.2 s):\nloading\nOut[5]: 42"],
    ),
    (
        "multi-line result",
        execution(),
        lines(("+result", "   a"), ("result", "0  1")),
        ["In [5] (1.2 s):\nOut[5]:\n   a\n0  1"],
    ),
    (
        "display is not labelled Out",
        execution(),
        lines(("+display", "'shown'"), ("+result", "1")),
        ["In [5] (1.2 s):\n'shown'\nOut[5]: 1"],
    ),
    (
        "error keeps traceback",
        execution(state="error"),
        lines(("+error", "Traceback"), ("error", "ValueError: bad")),
        ["In [5] (1.2 s):\nTraceback\nValueError: bad"],
    ),
    (
        "image in place, stand-in hidden",
        execution(rich=[{"index": 0, "line": 2, "mimetypes": ["image/png", "text/plain"]}]),
        lines("before", ("+rich", "<Figure size 640x480>"), ("rich", "more repr"), "after"),
        ["In [5] (1.2 s):\nbefore", Image(5, 0, "image/png"), "after"],
    ),
    (
        "interrupted",
        execution(state="interrupted"),
        lines("partial"),
        ["In [5] (1.2 s, interrupted):\npartial"],
    ),
    (
        "died and restarted",
        execution(
            state="died",
            died={"reason": "the kernel process exited with code 1", "restarted": True},
        ),
        [],
        [
            "In [5] (1.2 s, died: the kernel process exited with code 1; the kernel was restarted "
            "and its variables are gone):"
        ],
    ),
    (
        "output the disk refused",
        execution(unstored={"reason": "No space left on device", "from_line": 1201}),
        lines("stored"),
        [
            "In [5] (1.2 s):\nstored\n[output from line 1,201 on was not stored: No space left "
            "on device; the gateway's state dir needs space or write permission]"
        ],
    ),
]


@pytest.mark.parametrize(("case", "record", "shown", "expected"), CELLS, ids=[c[0] for c in CELLS])
def test_render_cell(case: str, record: dict, shown: list, expected: list) -> None:
    assert render_cell(record, CellOutput(shown, [], len(shown))) == expected


def test_head_and_tail_with_exact_omission() -> None:
    head = lines(*[f"line {i}" for i in range(1, 101)])
    tail = lines(*[f"line {i}" for i in range(4901, 5001)], start=4901)
    [text] = render_cell(execution(), CellOutput(head, tail, 5000))
    out = text.split("\n")
    assert out[1] == "line 1" and out[100] == "line 100"
    assert out[101] == (
        "… 4,800 lines omitted (101–4,900 of 5,000); "
        'read_output(execution=5, lines="101:4900") shows them …'
    )
    assert out[102] == "line 4901" and out[-1] == "line 5000"
    assert len(out) == 1 + 100 + 1 + 100


def test_character_limit_trims_long_lines() -> None:
    head = lines(*["x" * 1000 for _ in range(30)])
    tail = lines(*["y" * 1000 for _ in range(30)], start=31)
    [text] = render_cell(execution(), CellOutput(head, tail, 60), OutputLimits(max_chars=20_000))
    assert len(text) < 21_000
    assert "42 lines omitted (10–51 of 60)" in text


@pytest.mark.parametrize(
    ("audience", "call"),
    [
        ("model", 'read_output(execution=5, lines="3:10")'),
        ("person", "`loomgate output 5 --lines 3:10`"),
    ],
)
def test_only_head_known(audience: Audience, call: str) -> None:
    output = CellOutput(lines("a", "b"), [], 10)
    [text] = render_cell(execution(), output, OutputLimits(4), audience)
    assert text.endswith(f"… 8 lines omitted (3–10 of 10); {call} shows them …")


@pytest.mark.parametrize(
    ("audience", "answer", "expected"),
    [
        ("model", None, 'Answer with send_input(value="…", execution=5), or interrupt().'),
        ("person", None, "Answer with `loomgate input 5 TEXT`, or `loomgate interrupt`."),
        ("person", "Answer with a line `--input`.", "Answer with a line `--input`."),
    ],
)
def test_a_cell_waiting_for_input_says_how_each_reader_answers(
    audience: Audience, answer: str | None, expected: str
) -> None:
    waiting = execution(
        number=5, state="awaiting_input", input={"prompt": "Name? ", "password": False}
    )
    lines = render_running(waiting, [], audience, answer).split("\n")
    assert lines[0].startswith("In [5] is waiting for input (") and lines[0].endswith("'Name? '")
    assert lines[-1] == expected


@pytest.mark.parametrize(
    ("audience", "expected"),
    [
        (
            "model",
            "It keeps running. wait(execution=5) waits more; read_output and search_output "
            "look at its output; interrupt() stops it.",
        ),
        (
            "person",
            "It keeps running. `loomgate wait 5` waits more; `loomgate output 5` and "
            "`loomgate search` look at its output; `loomgate interrupt` stops it.",
        ),
    ],
)
def test_a_running_cell_says_how_each_reader_follows_it(audience: Audience, expected: str) -> None:
    """The last line of a running cell's reply names the reader's own calls."""
    running = execution(number=5, state="running", elapsed=3)
    assert render_running(running, [], audience).split("\n")[-1] == expected


@pytest.mark.parametrize(
    ("record", "last", "expected"),
    [
        (
            execution(state="running", elapsed=12.3),
            lines("epoch 1", "epoch 2"),
            [
                "In [5] is still running (12 s).",
                "Last lines:",
                "epoch 1",
                "epoch 2",
                "It keeps running. wait(execution=5) waits more; read_output and search_output "
                "look at its output; interrupt() stops it.",
            ],
        ),
        (
            execution(
                state="awaiting_input", elapsed=2, input={"prompt": "name? ", "password": False}
            ),
            [],
            [
                "In [5] is waiting for input (2.0 s): 'name? '",
                "No output yet.",
                'Answer with send_input(value="…", execution=5), or interrupt().',
            ],
        ),
    ],
)
def test_render_running(record: dict, last: list, expected: list) -> None:
    assert render_running(record, last).split("\n") == expected


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (read(), "In [3] stdout is empty."),
        (
            read(total=50, range="100:120"),
            "In [3] stdout has 50 lines; lines 100:120 are past its end. "
            'read_output(execution=3, stream="stdout", lines="-20:") reads its last 20 lines.',
        ),
        (
            read(total=1, range="5:"),
            "In [3] stdout has 1 line; lines 5: are past its end. "
            'read_output(execution=3, stream="stdout", lines="-1:") reads its last line.',
        ),
        (
            read(total=50, range="100:120", state="running"),
            "In [3] stdout has 50 lines so far (still running); lines 100:120 are not written yet.",
        ),
        (
            read(
                stream="combined",
                total=120,
                range="99:100",
                lines=[{"n": 99, "text": "a"}, {"n": 100, "text": "b", "clipped": 1500}],
            ),
            "In [3] combined, lines 99–100 of 120:\n 99│a\n100│b …[+1,500 chars]",
        ),
    ],
)
def test_render_read(response: wire.StreamRead, expected: str) -> None:
    assert render_read(response) == expected


def numbered(*texts: str, start: int = 1) -> list[wire.Line]:
    """Return stream lines numbered from `start`."""
    return [wire.Line(n=n, text=text) for n, text in enumerate(texts, start)]


# (lines read, budget, line numbers kept)
LEADING: list[tuple[list[wire.Line], int, list[int]]] = [
    (numbered("aaaa", "bbbb", "cccc"), 100, [1, 2, 3]),
    (numbered("aaaa", "bbbb", "cccc"), 14, [1, 2]),  # "1│aaaa\n": 7 characters a line
    (numbered("aaaa", "bbbb", "cccc"), 13, [1]),
    (numbered("x" * 50, "y"), 10, [1]),  # a line over the budget is still shown (clipped)
    ([], 10, []),
]


@pytest.mark.parametrize(("read_lines", "budget", "kept"), LEADING)
def test_leading_lines_fit_the_budget(
    read_lines: list[wire.Line], budget: int, kept: list[int]
) -> None:
    assert [line["n"] for line in leading(read_lines, budget)] == kept


# (range asked for, lines read, range end, gateway truncated, lines shown, expected last line)
READ_ON: list[tuple[str, int, int, bool, int, str]] = [
    ("101:299900", 100, 200, True, 30, 'read_output(execution=3, lines="131:299900") reads on'),
    ("-20:", 20, 200, False, 5, 'read_output(execution=3, lines="186:") reads on'),
    (":", 10, 10, False, 10, "10│x"),
    ("1:10", 10, 10, False, 4, 'read_output(execution=3, lines="5:10") reads on'),
]


@pytest.mark.parametrize(("asked", "count", "last", "truncated", "shown", "ending"), READ_ON)
def test_a_cut_read_ends_with_the_call_that_reads_on(
    asked: str, count: int, last: int, truncated: bool, shown: int, ending: str
) -> None:
    first = last - count + 1
    read_lines = numbered(*["x"] * count, start=first)
    response = read(
        stream="combined",
        total=300_000,
        range=asked,
        first=first,
        last=last,
        truncated=truncated,
        lines=read_lines,
    )
    text = render_read(response, read_lines[:shown])
    assert text.split("\n")[-1].endswith(ending), text
    assert (
        text.split("\n")[0] == f"In [3] combined, lines {first:,}–{first + shown - 1:,} of 300,000:"
    )


def test_a_cut_read_names_the_command_for_a_person() -> None:
    read_lines = numbered("a", "b", start=5)
    response = read(total=9, range="5:9", first=5, last=9, lines=read_lines)
    last = render_read(response, read_lines[:1], audience="person").split("\n")[-1]
    assert last == "… the range goes on; `loomgate output 3 --stream stdout --lines 6:9` reads on"


def search_group(execution: int, *specs: tuple[int, str, str]) -> wire.SearchGroup:
    """Return a search group of (n, text, marker) lines."""
    return wire.SearchGroup(
        execution=execution,
        lines=[wire.SearchLine(n=n, text=t, marker=m) for n, t, m in specs],  # type: ignore[typeddict-item]
    )


def test_search_results_fit_the_budget_and_name_the_next_match() -> None:
    groups = [
        search_group(1, (1, "c" * 5, "C"), (2, "m" * 5, "M")),
        search_group(2, (7, "m" * 5, "M"), (8, "c" * 5, "C")),
        search_group(3, (3, "m" * 5, "M")),
    ]
    page = SearchPage.within(groups, 20)  # "C 1│ccccc\n": 10 characters a line
    assert [(g["execution"], [x["n"] for x in g["lines"]]) for g in page.groups] == [(1, [1, 2])]
    assert (page.left_out, page.next_match) == (2, (2, 7))
    response = {
        "query": "m",
        "mode": "literal",
        "stream": "combined",
        "matches": 3,
        "truncated": False,
        "groups": groups,
        "searched": 3,
    }
    text = render_search(response, "all executions", page)
    assert text.split("\n")[-1] == (
        "… 2 more matches not shown (the reply is full); the next is In [2] line 7: "
        'read_output(execution=2, lines="7:7")'
    )


def test_a_huge_matching_line_is_clipped_with_its_length() -> None:
    groups = [search_group(4, (1, "z" * 100, "M"))]
    page = SearchPage.within(groups, 30)
    response = {
        "query": "z",
        "mode": "literal",
        "stream": "stdout",
        "matches": 1,
        "truncated": False,
        "groups": groups,
        "searched": 1,
    }
    assert (
        render_search(response, "In [4]", page).split("\n")[-1]
        == "M 1│" + "z" * 30 + " …[+70 chars]"
    )


def test_render_search_groups_and_markers() -> None:
    response = {
        "query": "alpha",
        "mode": "literal",
        "stream": "combined",
        "matches": 2,
        "truncated": True,
        "groups": [
            {
                "execution": 1,
                "lines": [
                    {"n": 4, "text": "x", "marker": "C"},
                    {"n": 5, "text": "alpha", "marker": "M"},
                ],
            },
            {"execution": 1, "lines": [{"n": 9, "text": "alpha", "marker": "M"}]},
            {"execution": 2, "lines": [{"n": 10, "text": "ALPHA", "marker": "M"}]},
        ],
    }
    assert render_search(response, "all executions").split("\n") == [
        "2 matches for 'alpha' (literal) in all executions combined:",
        "In [1]:",
        "C 4│x",
        "M 5│alpha",
        "--",
        "M 9│alpha",
        "--",
        "In [2]:",
        "M 10│ALPHA",
        "(more matches exist; only the first 2 are shown)",
    ]
    empty = dict(response, groups=[], matches=0)
    assert render_search(empty, "In [3]") == "No lines match 'alpha' (literal) in In [3] combined."


def test_render_kernels_marks_current() -> None:
    common = {"kernel_spec": "python3", "paths": []}
    kernels = [
        {
            "id": "aaaaaaaa-1",
            "name": "lab",
            "state": "idle",
            "lifetime": "persistent",
            "executions": 3,
            "connections": 1,
            "last_activity": 1000.0,
            **common,
        },
        {
            "id": "bbbbbbbb-2",
            "name": None,
            "state": "busy",
            "lifetime": "conversation",
            "executions": 10,
            "connections": 0,
            "last_activity": 1185.0,
            **common,
        },
    ]
    assert render_kernels(kernels, "bbbbbbbb-2", "local", now=1200.0).split("\n") == [
        "Kernels on local:",
        "   name  id        spec     state  lifetime      runs  idle        conn",
        "   lab   aaaaaaaa  python3  idle   persistent    3     3 min 20 s  1",
        "*  -     bbbbbbbb  python3  busy   conversation  10    15 s        0",
    ]


GAP = (
    "[output after line {n} may be missing: no gateway listened for 2.5 s "
    "(it was down, then took the kernel back)]"
)


@pytest.mark.parametrize(
    ("after_line", "expected"),
    [
        (2, ["In [5] (1.2 s):", "a", "b", GAP.format(n=2), "c"]),
        (0, ["In [5] (1.2 s):", GAP.format(n=0), "a", "b", "c"]),
        (3, ["In [5] (1.2 s):", "a", "b", "c", GAP.format(n=3)]),
    ],
    ids=["between lines", "before the first", "after the last"],
)
def test_a_gap_is_noted_where_it_is(after_line: int, expected: list[str]) -> None:
    gap = {"after_line": after_line, "since": 100.0, "until": 102.5}
    blocks = render_cell(execution(gaps=[gap]), CellOutput(lines("a", "b", "c"), [], 3))
    assert blocks == ["\n".join(expected)]


def test_a_gap_in_omitted_lines_is_noted_at_the_end() -> None:
    gap = {"after_line": 50, "since": 100.0, "until": 102.5}
    output = CellOutput(lines("a"), lines("z", start=100), 100)
    [text] = render_cell(execution(gaps=[gap]), output, OutputLimits(max_lines=2))
    assert text.split("\n")[-1] == GAP.format(n=50)


POOLED = ("python3", "workspace", "/home/p/project", 41, 52_400_000)


def info(
    prewarm: int, *pooled: tuple[str, str | None, str | None, int | None, int | None]
) -> wire.Info:
    """Return a gateway's info with `prewarm` and the given ready pool kernels: (kernel spec,
    profile, directory, the kernel's own pid, its rss bytes)."""
    return wire.Info(
        service="loomgate",
        version="0",
        protocol=1,
        capabilities=[],
        pid=1,
        started=0.0,
        kernel_specs=["python3"],
        default_kernel_spec="python3",
        conversation_grace_seconds=600.0,
        prewarm=prewarm,
        prewarmed=[
            wire.PooledKernel(
                kernel_spec=spec,
                sandbox=profile,
                cwd=cwd,
                pid=pid,
                rss_bytes=rss,
                launched_pid=None if pid is None else pid - 3,
            )
            for spec, profile, cwd, pid, rss in pooled
        ],
    )


KEPT = "prewarmed: 1 idle kernel per kernel spec, sandbox profile and directory in use"


@pytest.mark.parametrize(
    ("about", "expected"),
    [
        (info(0), "prewarmed: off (loomgate-gateway --prewarm N turns it on)"),
        (info(1), f"{KEPT}; none ready yet (starting)"),
        (
            info(2),
            "prewarmed: 2 idle kernels per kernel spec, sandbox profile and directory in use; "
            "none ready yet (starting)",
        ),
        # Each pool says what it is for: the default profile in two directories, an unconfined
        # one (it moves into the directory it is claimed for), an upstream's; the kernel's own
        # pid and memory, never those of the bubblewrap that launched it.
        (
            info(
                1,
                POOLED,
                ("python3", "workspace", "/srv/other", 45, 51_600_000),
                ("python3", "none", None, 47, None),
                ("ir", None, None, None, None),
            ),
            f"{KEPT}:\n"
            "  python3, workspace, in /home/p/project: pid 41, 52 MB\n"
            "  python3, workspace, in /srv/other: pid 45, 52 MB\n"
            "  python3, none, any directory: pid 47\n"
            "  ir, started by the upstream, any directory: ready",
        ),
    ],
)
def test_prewarmed_kernels_say_their_pool_and_own_process(about: wire.Info, expected: str) -> None:
    assert render_prewarmed(about) == expected


def gone_kernel(ended: float | None, reason: str | None) -> wire.Kernel:
    """Return a kernel's model that is not live, `ended` or not, with `reason`."""
    return kernel(state="gone", alive=False, ended=ended, end_reason=reason)


@pytest.mark.parametrize(
    ("kernel", "last_lines"),
    [
        (
            gone_kernel(5.0, None),
            [
                "executions: 2 (latest In [2])",
                "sandbox: not sandboxed by loomgate",
                "connections: 0",
            ],
        ),
        (
            gone_kernel(5.0, "the kernel process ended while the gateway was down"),
            [
                "executions: 2 (latest In [2])",
                "sandbox: not sandboxed by loomgate",
                "died: the kernel process ended while the gateway was down",
                "connections: 0",
            ],
        ),
        (
            gone_kernel(None, "its process (pid 9) runs but did not answer"),
            [
                "executions: 2 (latest In [2])",
                "sandbox: not sandboxed by loomgate",
                "not taken back: its process (pid 9) runs but did not answer",
                "connections: 0",
            ],
        ),
    ],
    ids=["stopped", "died-while-away", "not-answering"],
)
def test_a_gone_kernel_says_why(kernel: wire.Kernel, last_lines: list[str]) -> None:
    first, *rest = render_kernel(kernel, gateway="local").split("\n")
    assert first == "Kernel lab [cccccccc] on local: stopped, persistent, python3"
    assert rest == last_lines


@pytest.mark.parametrize(
    ("kernels", "problem", "expected"),
    [
        (
            None,
            "",
            "Jupyter server jupyter:8888 at http://localhost:8888 (root /home/me) has no loomgate "
            "extension; to reach its kernels: `loomgate jupyter enable` (or enable the "
            "loomgate.gateway server extension), then restart that server.",
        ),
        (
            None,
            "no answer within 5 s",
            "Jupyter server jupyter:8888 at http://localhost:8888 (root /home/me): "
            "no answer within 5 s",
        ),
        (
            [],
            "",
            "Jupyter server jupyter:8888 at http://localhost:8888 (root /home/me): no kernels.",
        ),
    ],
    ids=["no-extension", "problem", "no-kernels"],
)
def test_a_jupyter_server_in_one_section(
    kernels: list[wire.Kernel] | None, problem: str, expected: str
) -> None:
    assert (
        render_jupyter_server(
            "jupyter:8888", "http://localhost:8888", "/home/me", kernels, None, problem
        )
        == expected
    )


def test_a_jupyter_servers_kernels_show_their_notebooks() -> None:
    kernel = gone_kernel(None, None)
    kernel.update(state="idle", alive=True, ended=None, paths=["work/analysis.ipynb"])
    text = render_jupyter_server("jupyter:8888", "http://h:8888", "", [kernel], kernel["id"], "")
    assert text.split("\n") == [
        "Kernels on Jupyter server jupyter:8888 at http://h:8888:",
        "   name  id        spec     state  lifetime    runs  idle  conn  notebook",
        "*  lab   cccccccc  python3  idle   persistent  2     -     0     work/analysis.ipynb",
    ]


@pytest.mark.parametrize(
    ("audience", "expected"),
    [
        (
            "model",
            "'a.ipynb' names kernels on several Jupyter servers: lab on jupyter:8888 "
            "(work/a.ipynb); cccccccc on jupyter:8889; pass gateway= to choose one",
        ),
        (
            "person",
            "'a.ipynb' names kernels on several Jupyter servers: lab on jupyter:8888 "
            "(work/a.ipynb); cccccccc on jupyter:8889; choose one with --gateway jupyter:PORT",
        ),
    ],
)
def test_a_notebook_on_several_servers_asks_to_choose(audience: Audience, expected: str) -> None:
    named = gone_kernel(None, None)
    named["paths"] = ["work/a.ipynb"]
    unnamed = gone_kernel(None, None)
    unnamed["name"] = None
    matches = [("jupyter:8888", named), ("jupyter:8889", unnamed)]
    assert several_kernels("a.ipynb", matches, audience) == expected


@pytest.mark.parametrize(
    ("audience", "lister"),
    [("model", "list_kernels shows them"), ("person", "`loomgate kernels` lists them")],
)
def test_a_notebook_path_that_names_nothing(audience: Audience, lister: str) -> None:
    assert no_notebook_kernel("b.ipynb", "local", audience) == (
        "no kernel serves a notebook 'b.ipynb' on local or on a Jupyter server of this machine "
        f"with loomgate's extension ({lister})"
    )


def live_kernel(paths: list[str], attached: float | None, alive: bool = True) -> wire.Kernel:
    """Return a kernel's model used by notebooks at `paths`, attached on an upstream or not."""
    kernel = gone_kernel(None, None)
    kernel.update(state="idle", alive=alive, paths=paths, attached=attached)
    return kernel


@pytest.mark.parametrize(
    ("kernel", "refusal"),
    [
        (live_kernel([], None), None),
        (live_kernel(["a.ipynb"], None, alive=False), None),
        (live_kernel([], 5.0, alive=False), None),
        (
            live_kernel(["work/a.ipynb"], None),
            "kernel lab serves work/a.ipynb, open in a person's Jupyter; stopping it ends their "
            "session and variables. Call stop_kernel(kernel='lab', force=true) if that is what "
            "is wanted",
        ),
        (
            live_kernel([], 5.0),
            "kernel lab was started on the upstream by someone else; stopping it ends their "
            "session and variables. Call stop_kernel(kernel='lab', force=true) if that is what "
            "is wanted",
        ),
    ],
)
def test_stopping_someone_elses_kernel_needs_force(
    kernel: wire.Kernel, refusal: str | None
) -> None:
    assert stop_needs_force(kernel, "lab") == refusal


def test_unattached_upstream_kernels_are_a_table() -> None:
    kernels = [
        wire.UpstreamKernel(id="4f0c1234-x", kernel_spec="python3", state="idle", connections=1),
        wire.UpstreamKernel(id="77aa5678-y", kernel_spec="", state="busy", connections=0),
    ]
    assert render_unattached(kernels, "hub").split("\n") == [
        "Running on hub's upstream, not recorded yet (connect to one by its id to attach it; "
        "its earlier cells have no records):",
        "id        spec     state  conn",
        "4f0c1234  python3  idle   1",
        "77aa5678  -        busy   0",
    ]
    assert render_unattached([], "hub") == ""


def test_an_attached_kernel_says_since_when_it_is_recorded() -> None:
    assert attached_note(live_kernel([], None)) == ""
    note = attached_note(live_kernel([], 1_800_000_000.0))
    assert note.startswith("Someone else started this kernel on the upstream; loomgate records ")
    assert note.endswith("(earlier cells have no records; the In [N] numbering is the kernel's).")


@pytest.mark.parametrize(
    ("number", "waited", "last_line", "expected"),
    [
        (5, 0.4, "", "In [5] running 0 s"),
        (5, 2.6, "", "In [5] running 3 s"),
        (5, 12.0, "b", "In [5] running 12 s: b"),
        (5, 1.0, "x" * 250, "In [5] running 1 s: " + "x" * 200),
        (None, 1.0, "", "Running 1 s"),
    ],
    ids=["no-output-yet", "rounded", "last-line", "clipped-to-200", "number-not-known-yet"],
)
def test_progress_names_the_cell_its_wait_and_last_line(
    number: int | None, waited: float, last_line: str, expected: str
) -> None:
    assert progress_message(number, waited, last_line) == expected


def test_progress_without_a_last_line_says_only_the_wait() -> None:
    assert progress_message(5, 0.4) == "In [5] running 0 s"


def test_the_input_dialog_names_the_cell_and_its_prompt() -> None:
    assert input_dialog_message(3, "name? ") == "In [3] asks for input: name? "


def test_images_not_shown_say_which_and_why() -> None:
    image = Image(execution=7, index=2, mime="image/png")
    assert image_over_count(image, 8) == "[image 2 of In [7] not shown: at most 8 per result]"
    assert image_over_size(image, 4 << 20) == "[image 2 of In [7] not shown: larger than 4 MB]"


@pytest.mark.parametrize(("execution_number", "scope"), [(None, "all executions"), (12, "In [12]")])
def test_search_scope(execution_number: int | None, scope: str) -> None:
    assert search_scope(execution_number) == scope


@pytest.mark.parametrize(
    ("kernel", "gateway", "created", "expected"),
    [
        (
            live_kernel([], None),
            "local",
            True,
            "Created kernel lab on local (2 executions so far).",
        ),
        (
            live_kernel(["analysis.ipynb", "b.ipynb"], None),
            "jupyter:8888",
            False,
            "Connected to kernel lab serving analysis.ipynb, b.ipynb on jupyter:8888 "
            "(2 executions so far).",
        ),
        (
            cast(wire.Kernel, live_kernel([], None) | {"name": None, "executions": 0}),
            "local",
            False,
            "Connected to kernel cccccccc on local (0 executions so far).",
        ),
    ],
    ids=["created", "connected-serving", "unnamed"],
)
def test_connected_note(kernel: wire.Kernel, gateway: str, created: bool, expected: str) -> None:
    assert connected_note(kernel, gateway, created=created) == expected


def test_a_kernel_of_the_persons_jupyter_is_shared() -> None:
    assert shared_kernel_note() == (
        "This kernel belongs to a Jupyter server the person uses: their cells and yours "
        "share its variables and its In [N] numbering."
    )


@pytest.mark.parametrize(
    ("killed", "expected"),
    [
        (None, "Kernel lab was reset: its variables are gone; records and numbering are kept."),
        (
            execution(number=4, state="killed"),
            "Kernel lab was reset: its variables are gone; records and numbering are kept.\n"
            "In [4] was running and was killed.",
        ),
    ],
    ids=["idle", "killed-a-cell"],
)
def test_reset_note(killed: wire.Execution | None, expected: str) -> None:
    assert reset_note(live_kernel([], None), killed) == expected


def test_stopped_note() -> None:
    assert stopped_note(gone_kernel(5.0, None)) == "Stopped kernel lab; its records stay readable."
    unnamed = cast(wire.Kernel, gone_kernel(5.0, None) | {"name": None})
    assert stopped_note(unnamed) == "Stopped kernel cccccccc; its records stay readable."


@pytest.mark.parametrize(
    ("refuse", "expected"),
    [
        (
            nothing_run_yet,
            "Nothing has run in this conversation yet: run_cell starts its kernel, and "
            "connect attaches to an existing one (list_kernels shows them).",
        ),
        (
            lambda: kernel_gone_refusal("0123456789abcdef"),
            "This conversation's kernel 01234567 is no longer running (the gateway "
            "restarted, or the kernel was stopped), so its variables are gone; the cell "
            "was not run. Its records stay readable with kernel='01234567'. Run the "
            "cell again to start a new kernel, or connect() to another.",
        ),
        (
            lambda: stopped_kernel_refusal("0123456789abcdef"),
            "kernel 01234567 was stopped; its records stay readable with "
            "read_output(kernel='01234567', …); connect to a name to start a kernel",
        ),
        (nothing_to_interrupt, "Nothing is running on this kernel to interrupt."),
        (
            lambda: unexpected_failure(KeyError("x")),
            "loomgate-mcp failed unexpectedly (KeyError: 'x').",
        ),
    ],
    ids=["nothing-run-yet", "kernel-gone", "stopped-by-id", "nothing-to-interrupt", "bug"],
)
def test_refusals_of_what_cannot_be_done_now(refuse: Callable[[], str], expected: str) -> None:
    assert refuse() == expected
