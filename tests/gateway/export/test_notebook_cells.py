"""Records → notebook cells, table-tested on real record stores (no kernel): what each kind of
output, each end and each loss of state becomes, every notebook validated by nbformat."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from loomgate.gateway import __version__
from loomgate.gateway.export.cells import iso
from loomgate.gateway.export.notebook import (
    DEFAULT_MAX_LINES,
    MEDIA_TYPE,
    NotebookSpec,
    notebook_cells,
    notebook_file,
    notebook_metadata,
)
from loomgate.gateway.export.selection import Selection, SelectionError
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.records.stored_meta import KernelStart
from loomgate.shared import wire
from loomgate.shared.wire import Death, InputRequest, Source, Unstored
from tests.support.cells import PNG_8X8

SPEC = NotebookSpec(name="python3", display_name="Python 3 (ipykernel)", language="python")


def notebook(
    store: RecordStore, spec: NotebookSpec, selection: Selection, max_lines: int
) -> wire.Notebook:
    """Return the notebook the endpoint answers for these records: its metadata and cells, as
    handlers/notebook.py puts them together."""
    return wire.Notebook(
        nbformat=4,
        nbformat_minor=5,
        metadata=notebook_metadata(store, spec, selection, max_lines),
        cells=list(notebook_cells(store, selection, max_lines)),
    )


COLOURED = ["\x1b[31mTraceback (most recent call last)\x1b[0m", "\x1b[31mValueError\x1b[0m: bad"]
HTML = {"text/html": "<b>bold</b>", "text/plain": "bold"}
IMAGE = {"image/png": PNG_8X8, "text/plain": "<Figure size 8x8>"}
JSON = {"application/json": {"a": [1, 2]}, "text/plain": "{'a': [1, 2]}"}


def new_store(directory: Path) -> RecordStore:
    """Return an empty store of a kernel named demo."""
    start = KernelStart(
        id="k-1", name="demo", lifetime="persistent", kernel_spec="python3", cwd=None, attached=None
    )
    return RecordStore.create(directory, start)


def cell(
    store: RecordStore, code: str = "x", source: Source = "loomgate", client: str | None = None
) -> ExecutionRecord:
    """Return a new running record of `code`, numbered next."""
    return store.new_record(
        number=store.last_number + 1, msg_id="m", code=code, source=source, client=client
    )


# -- what each scenario stores ------------------------------------------------------------------


def interleaved(store: RecordStore) -> None:
    r = cell(store)
    r.write_stream("stdout", "a\n")
    r.write_stream("stderr", "warn\n")
    r.write_stream("stdout", "b\nc\n")
    r.set_state("completed")


def progress(store: RecordStore) -> None:
    r = cell(store)
    r.write_stream("stdout", "start\n10%\r50%\r100%\n")
    r.set_state("completed")


def images_and_html(store: RecordStore) -> None:
    r = cell(store)
    r.write_stream("stdout", "before\n")
    r.write_bundle(IMAGE, {"image/png": {"width": 8}}, result=False)
    r.write_bundle(HTML, {}, result=False)
    r.write_stream("stdout", "after\n")
    r.write_bundle(JSON, {}, result=True)
    r.set_state("completed")


def plain_result(store: RecordStore) -> None:
    r = cell(store, "6 * 7")
    r.write_bundle({"text/plain": "42"}, {}, result=True)
    r.set_state("completed")


def raised(store: RecordStore) -> None:
    r = cell(store, "raise ValueError('bad')")
    r.write_stream("stdout", "trying\n")
    r.write_error("ValueError", "bad", COLOURED)
    r.set_state("error")


def interrupted(store: RecordStore) -> None:
    r = cell(store, "time.sleep(60)")
    r.write_error("KeyboardInterrupt", "", ["KeyboardInterrupt: "])
    r.set_state("interrupted")


def died(store: RecordStore) -> None:
    r = cell(store, "os._exit(3)")
    r.write_stream("stdout", "going\n")
    store.note_restart("died", "the kernel process exited with code 3")
    r.set_state("died", died=Death(reason="exited with code 3", restarted=True), note="restarted")
    after = cell(store, "1")
    after.set_state("completed")


def reset(store: RecordStore) -> None:
    cell(store, "a = 1").set_state("completed")
    store.note_restart("reset")
    cell(store, "b = 2").set_state("completed")


def killed_by_reset(store: RecordStore) -> None:
    r = cell(store, "time.sleep(60)")
    store.note_restart("reset")
    r.set_state("killed", note="the kernel was reset")


def gap(store: RecordStore) -> None:
    r = cell(store, "for i in range(9): print(i)")
    r.write_stream("stdout", "0\n")
    r.note_gap(until=time.time() + 5)
    r.write_stream("stdout", "8\n")
    r.set_state("completed")


def lost(store: RecordStore) -> None:
    r = cell(store)
    r.write_stream("stdout", "half\n")
    r.set_state("lost", note="the gateway stopped while this execution ran")


def running(store: RecordStore) -> None:
    cell(store, "print('abc', end='')").write_stream("stdout", "abc")


def long_output(store: RecordStore) -> None:
    r = cell(store, "for i in range(30): print(i)")
    r.write_stream("stdout", "".join(f"{i}\n" for i in range(30)))
    r.set_state("completed")


def awaiting_input(store: RecordStore) -> None:
    r = cell(store, "input('who? ')")
    r.set_state("awaiting_input", input=InputRequest(prompt="who? ", password=False))


def killed_alone(store: RecordStore) -> None:
    r = cell(store, "time.sleep(60)")
    r.set_state("killed", note="the kernel was shut down")


def resets_after_the_last(store: RecordStore) -> None:
    cell(store, "a = 1").set_state("completed")
    cell(store, "b = 2").set_state("completed")
    store.note_restart("reset")
    cell(store, "c = 3").set_state("completed")
    store.note_restart("reset")


def plain_displays(store: RecordStore) -> None:
    r = cell(store)
    r.write_bundle({"text/plain": "one"}, {}, result=False)
    r.write_bundle({"text/plain": "two"}, {}, result=False)
    r.set_state("completed")


def textless_bundles(store: RecordStore) -> None:
    """Bundles whose text/plain is empty: no line of their own in `combined`."""
    r = cell(store)
    r.write_bundle({"text/html": "<i>1</i>", "text/plain": ""}, {}, result=False)
    r.write_stream("stdout", "between\n")
    r.write_bundle({"text/html": "<i>2</i>", "text/plain": ""}, {}, result=False)
    r.write_bundle(HTML, {}, result=False)
    r.write_bundle({"text/html": "<i>3</i>", "text/plain": ""}, {}, result=False)
    r.set_state("completed")


def many_line_stand_in(store: RecordStore) -> None:
    r = cell(store)
    r.write_bundle({"text/html": "<table/>", "text/plain": "row 1\nrow 2\nrow 3"}, {}, result=True)
    r.write_stream("stdout", "after\n")
    r.set_state("completed")


def two_errors(store: RecordStore) -> None:
    r = cell(store)
    r.write_error("KeyError", "'a: b'", ["Traceback (most recent call last)", "KeyError: 'a: b'"])
    r.write_stream("stdout", "handled\n")
    r.write_error("ValueError", "bad", COLOURED)
    r.set_state("error")


def long_then_error(store: RecordStore) -> None:
    r = cell(store)
    r.write_stream("stdout", "".join(f"{i}\n" for i in range(30)))
    r.write_error("ValueError", "bad", COLOURED)
    r.set_state("error")


def error_then_long(store: RecordStore) -> None:
    """An error in the head of a cut output: whether it was cut is not known, so its plain
    lines are kept, under the record's name and value."""
    r = cell(store)
    r.write_error("ValueError", "bad", COLOURED)
    r.write_stream("stdout", "".join(f"{i}\n" for i in range(30)))
    r.set_state("error")


def died_unexplained(store: RecordStore) -> None:
    """A death no restart was noted for (nor a reason): said after the cell, no restart."""
    r = cell(store, "os._exit(3)")
    r.set_state("died")


def long_error(store: RecordStore) -> None:
    """A 30-line traceback: its first 5 lines in the head, its last 5 in the tail."""
    r = cell(store)
    frames = [f"\x1b[32mframe {i}\x1b[0m" for i in range(29)]
    r.write_error("ValueError", "bad", [*frames, "\x1b[31mValueError\x1b[0m: bad"])
    r.set_state("error")


def huge_coloured_traceback(store: RecordStore) -> None:
    """A traceback whose colours fill the kept file (1 MiB): its plain lines are used."""
    r = cell(store)
    r.write_error(
        "ValueError", "bad", ["\x1b[31m" + "x" * (1 << 20) + "\x1b[0m", "ValueError: bad"]
    )
    r.set_state("error")


def long_with_displays(store: RecordStore) -> None:
    """30 lines: displays at lines 2 (head), 25 (the last left out) and 28 (tail)."""
    r = cell(store)
    r.write_stream("stdout", "a\n")
    r.write_bundle({"text/html": "<i>1</i>", "text/plain": "d1"}, {}, result=False)
    r.write_stream("stdout", "".join(f"{i}\n" for i in range(3, 25)))
    r.write_bundle({"text/html": "<i>2</i>", "text/plain": "d2"}, {}, result=False)
    r.write_stream("stdout", "26\n27\n")
    r.write_bundle({"text/html": "<i>3</i>", "text/plain": "d3"}, {}, result=False)
    r.write_stream("stdout", "29\n30\n")
    r.set_state("completed")


def exactly_the_limit(store: RecordStore) -> None:
    r = cell(store)
    r.write_stream("stdout", "".join(f"{i}\n" for i in range(10)))
    r.set_state("completed")


# The outputs of a code cell, shortened: (type, name or MIME types, text) per output.
Shape = list[tuple[Any, ...]]


def shape(output: dict[str, Any]) -> tuple[Any, ...]:
    """Return an output as the table writes it."""
    kind = output["output_type"]
    if kind == "stream":
        return ("stream", output["name"], output["text"])
    if kind == "error":
        return ("error", output["ename"], output["evalue"], output["traceback"])
    mimes = tuple(sorted(output["data"]))
    count = (output["execution_count"],) if kind == "execute_result" else ()
    return (kind, mimes, *count)


# (scenario, max_lines, the cells: ("code", number, outputs, tags) or ("markdown", words))
CASES: list[tuple[Callable[[RecordStore], None], int, list[tuple[Any, ...]]]] = [
    (
        interleaved,
        100,
        [
            (
                "code",
                1,
                [
                    ("stream", "stdout", "a\n"),
                    ("stream", "stderr", "warn\n"),
                    ("stream", "stdout", "b\nc\n"),
                ],
                None,
            )
        ],
    ),
    (progress, 100, [("code", 1, [("stream", "stdout", "start\n100%\n")], None)]),
    (
        images_and_html,
        100,
        [
            (
                "code",
                1,
                [
                    ("stream", "stdout", "before\n"),
                    ("display_data", ("image/png", "text/plain")),
                    ("display_data", ("text/html", "text/plain")),
                    ("stream", "stdout", "after\n"),
                    ("execute_result", ("application/json", "text/plain"), 1),
                ],
                None,
            )
        ],
    ),
    (plain_result, 100, [("code", 1, [("execute_result", ("text/plain",), 1)], None)]),
    (
        raised,
        100,
        [
            (
                "code",
                1,
                [("stream", "stdout", "trying\n"), ("error", "ValueError", "bad", COLOURED)],
                None,
            )
        ],
    ),
    (
        interrupted,
        100,
        [
            (
                "code",
                1,
                [("error", "KeyboardInterrupt", "", ["KeyboardInterrupt: "])],
                ["loomgate-interrupted"],
            ),
            ("markdown", "**In [1] was interrupted**."),
        ],
    ),
    (
        died,
        100,
        [
            ("code", 1, [("stream", "stdout", "going\n")], ["loomgate-died"]),
            (
                "markdown",
                "**The kernel process died** here (the kernel process exited with code 3)",
            ),
            ("code", 2, [], None),
        ],
    ),
    (
        reset,
        100,
        [
            ("code", 1, [], None),
            ("markdown", "**The kernel was reset** here"),
            ("code", 2, [], None),
        ],
    ),
    (
        killed_by_reset,
        100,
        [("code", 1, [], ["loomgate-killed"]), ("markdown", "**The kernel was reset** here")],
    ),
    (
        gap,
        100,
        [
            ("code", 1, [("stream", "stdout", "0\n8\n")], None),
            ("markdown", "(after its line 1) may be missing: no gateway listened then."),
        ],
    ),
    (
        lost,
        100,
        [
            ("code", 1, [("stream", "stdout", "half\n")], ["loomgate-lost"]),
            ("markdown", "**In [1] ended unseen (its end was never seen)**: the gateway stopped"),
        ],
    ),
    (
        running,
        100,
        [
            ("code", 1, [("stream", "stdout", "abc")], ["loomgate-running"]),
            ("markdown", "**In [1] was still running when this notebook was exported**."),
        ],
    ),
    (
        long_output,
        10,
        [
            (
                "code",
                1,
                [
                    ("stream", "stdout", "0\n1\n2\n3\n4\n"),
                    ("display_data", ("text/plain",)),
                    ("stream", "stdout", "25\n26\n27\n28\n29\n"),
                ],
                None,
            )
        ],
    ),
]


def numbers(first: int, last: int) -> str:
    """Return the printed lines first to last."""
    return "".join(f"{i}\n" for i in range(first, last + 1))


CASES += [
    (
        awaiting_input,
        100,
        [
            ("code", 1, [], ["loomgate-awaiting-input"]),
            ("markdown", "**In [1] was waiting for input when this notebook was exported**."),
        ],
    ),
    (
        killed_alone,
        100,
        [
            ("code", 1, [], ["loomgate-killed"]),
            ("markdown", "**In [1] was killed**: the kernel was shut down."),
        ],
    ),
    (
        resets_after_the_last,
        100,
        [
            ("code", 1, [], None),
            ("code", 2, [], None),
            ("markdown", "**The kernel was reset** here"),
            ("code", 3, [], None),
            ("markdown", "**The kernel was reset** here"),
        ],
    ),
    (
        plain_displays,
        100,
        [("code", 1, [("display_data", ("text/plain",)), ("display_data", ("text/plain",))], None)],
    ),
    (
        textless_bundles,
        100,
        [
            (
                "code",
                1,
                [
                    ("display_data", ("text/html", "text/plain")),
                    ("stream", "stdout", "between\n"),
                    ("display_data", ("text/html", "text/plain")),
                    ("display_data", ("text/html", "text/plain")),
                    ("display_data", ("text/html", "text/plain")),
                ],
                None,
            )
        ],
    ),
    (
        many_line_stand_in,
        100,
        [
            (
                "code",
                1,
                [
                    ("execute_result", ("text/html", "text/plain"), 1),
                    ("stream", "stdout", "after\n"),
                ],
                None,
            )
        ],
    ),
    (
        two_errors,
        100,
        [
            (
                "code",
                1,
                [
                    (
                        "error",
                        "KeyError",
                        "'a: b'",  # read from its last line, up to the first ": "
                        ["Traceback (most recent call last)", "KeyError: 'a: b'"],
                    ),
                    ("stream", "stdout", "handled\n"),
                    ("error", "ValueError", "bad", COLOURED),
                ],
                None,
            )
        ],
    ),
    (
        long_then_error,
        10,
        [
            (
                "code",
                1,
                [
                    ("stream", "stdout", numbers(0, 4)),
                    ("display_data", ("text/plain",)),
                    ("stream", "stdout", numbers(27, 29)),
                    ("error", "ValueError", "bad", COLOURED),  # begun in the tail: coloured
                ],
                None,
            )
        ],
    ),
    (
        long_error,
        10,
        [
            (
                "code",
                1,
                [
                    # Cut: each part keeps its plain lines; the last takes the record's error.
                    ("error", "frame 4", "", [f"frame {i}" for i in range(5)]),
                    ("display_data", ("text/plain",)),
                    (
                        "error",
                        "ValueError",
                        "bad",
                        [*(f"frame {i}" for i in range(25, 29)), "ValueError: bad"],
                    ),
                ],
                None,
            )
        ],
    ),
    (
        huge_coloured_traceback,
        100,
        [("code", 1, [("error", "ValueError", "bad", ["x" * (1 << 20), "ValueError: bad"])], None)],
    ),
    (
        long_with_displays,
        10,
        [
            (
                "code",
                1,
                [
                    ("stream", "stdout", "a\n"),
                    ("display_data", ("text/html", "text/plain")),
                    ("stream", "stdout", numbers(3, 5)),
                    ("display_data", ("text/plain",)),
                    ("stream", "stdout", numbers(26, 27)),
                    ("display_data", ("text/html", "text/plain")),
                    ("stream", "stdout", numbers(29, 30)),
                ],
                None,
            )
        ],
    ),
    (
        error_then_long,
        10,
        [
            (
                "code",
                1,
                [
                    (
                        "error",
                        "ValueError",
                        "bad",
                        ["Traceback (most recent call last)", "ValueError: bad"],
                    ),
                    ("stream", "stdout", numbers(0, 2)),
                    ("display_data", ("text/plain",)),
                    ("stream", "stdout", numbers(25, 29)),
                ],
                None,
            )
        ],
    ),
    (
        died_unexplained,
        100,
        [
            ("code", 1, [], ["loomgate-died"]),
            ("markdown", "**In [1] died with the kernel process**."),
        ],
    ),
    (exactly_the_limit, 10, [("code", 1, [("stream", "stdout", numbers(0, 9))], None)]),
    (
        long_output,
        11,
        [
            (
                "code",
                1,
                [
                    ("stream", "stdout", numbers(0, 4)),
                    ("display_data", ("text/plain",)),
                    ("stream", "stdout", numbers(24, 29)),
                ],
                None,
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("scenario", "max_lines", "expected"), CASES, ids=lambda c: getattr(c, "__name__", "")
)
async def test_records_become_these_cells(
    tmp_path: Path,
    scenario: Callable[[RecordStore], None],
    max_lines: int,
    expected: list[tuple[Any, ...]],
) -> None:
    store = new_store(tmp_path / "k-1")
    scenario(store)
    exported = notebook(store, SPEC, Selection(), max_lines)
    nbformat.validate(nbformat.reads(notebook_file(exported), as_version=4))
    cells = exported["cells"]
    assert len(cells) == len(expected), [c["source"] for c in cells]
    for got, want in zip(cells, expected, strict=True):
        assert got["cell_type"] == want[0]
        if want[0] == "markdown":
            assert want[1] in got["source"], got["source"]
            continue
        _, number, outputs, tags = want
        assert got["execution_count"] == number
        assert got["metadata"]["loomgate"]["number"] == number
        assert [shape(o) for o in got["outputs"]] == outputs
        assert got["metadata"].get("tags") == tags


async def test_every_mime_type_and_its_metadata_are_kept(tmp_path: Path) -> None:
    store = new_store(tmp_path / "k-1")
    images_and_html(store)
    outputs = notebook(store, SPEC, Selection(), 100)["cells"][0]["outputs"]
    assert outputs[1]["data"] == IMAGE
    assert outputs[1]["metadata"] == {"image/png": {"width": 8}}
    assert outputs[2]["data"] == HTML
    assert outputs[4]["data"] == JSON  # JSON stays an object, not its text


async def test_a_long_output_names_the_command_for_its_middle(tmp_path: Path) -> None:
    store = new_store(tmp_path / "k-1")
    long_output(store)
    code = notebook(store, SPEC, Selection(), 10)["cells"][0]
    note = code["outputs"][1]
    assert note["data"]["text/plain"] == (
        "… 20 lines of In [1] left out here (lines 6 to 25 of 30); read them with: "
        "loomgate output 1 --kernel demo --lines 6:25"
    )
    assert note["metadata"] == {"loomgate": {"omitted": {"first": 6, "last": 25, "total": 30}}}
    assert code["metadata"]["loomgate"]["omitted"] == {"first": 6, "last": 25}
    assert code["metadata"]["loomgate"]["lines"] == 30


async def test_the_cell_metadata_says_who_ran_it_when_and_how_it_ended(tmp_path: Path) -> None:
    store = new_store(tmp_path / "k-1")
    r = cell(store, "1", client="conversation 3f2a9b")
    r.set_state("completed")
    got = notebook(store, SPEC, Selection(), 100)["cells"][0]["metadata"]
    loomgate = got["loomgate"]
    assert loomgate["source"] == "loomgate"
    assert loomgate["client"] == "conversation 3f2a9b"
    assert loomgate["state"] == "completed"
    assert loomgate["started"] == r.meta["started"]
    assert loomgate["elapsed"] == pytest.approx(r.meta["finished"] - r.meta["started"])  # type: ignore[operator]
    assert loomgate["gaps"] == []
    assert got["execution"]["iopub.execute_input"].endswith("Z")


async def test_the_notebook_names_the_kernelspec_and_language(tmp_path: Path) -> None:
    store = new_store(tmp_path / "k-1")
    exported = notebook(store, SPEC, Selection(), 100)
    assert exported["metadata"]["kernelspec"] == {
        "name": "python3",
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
    }
    assert exported["metadata"]["language_info"] == {"name": "python"}  # the kernel told nothing
    store.meta["language_info"] = {"name": "python", "version": "3.12.1", "file_extension": ".py"}
    exported = notebook(store, SPEC, Selection(), 100)
    assert exported["metadata"]["language_info"]["version"] == "3.12.1"
    assert exported["cells"] == []
    nbformat.validate(nbformat.reads(notebook_file(exported), as_version=4))


def who_ran(store: RecordStore) -> None:
    """Six cells: the CLI's, two conversations', another Jupyter client's; a reset after 3."""
    cell(store, "1", client="cli").set_state("completed")
    cell(store, "2", client="conversation aa").set_state("completed")
    cell(store, "3", source="other").set_state("completed")
    store.note_restart("reset")
    cell(store, "4", client="conversation bb").set_state("completed")
    cell(store, "5", client="cli").set_state("completed")
    cell(store, "6", client="conversation aa").set_state("completed")


@pytest.mark.parametrize(
    ("executions", "source", "client", "cells"),
    [
        (None, None, None, ["1", "2", "3", "reset", "4", "5", "6"]),
        ("2:4", None, None, ["2", "3", "reset", "4"]),
        ("-2:", None, None, ["5", "6"]),
        (":2", None, None, ["1", "2"]),
        ("4", None, None, ["4"]),
        (None, "other", None, ["3", "reset"]),
        (None, None, "conversation", ["2", "reset", "4", "6"]),
        (None, None, "conversation aa", ["2", "reset", "6"]),
        ("-1:", None, "cli", ["5"]),
        ("7:", None, None, []),
        (":-2", None, None, ["1", "2", "3", "reset", "4", "5"]),
        ("1:3", None, None, ["1", "2", "3", "reset"]),
        (":1", None, None, ["1"]),
        ("-3:-2", None, None, ["4", "5"]),
        ("-10:", None, None, ["1", "2", "3", "reset", "4", "5", "6"]),
        ("-10:-8", None, None, []),
        ("3:", None, "cli", ["5"]),
        (None, "loomgate", "cli", ["1", "reset", "5"]),
        (None, None, "conv", []),  # a first word, whole
        (None, None, "cli", ["1", "reset", "5"]),
    ],
)
async def test_a_selection_keeps_these_executions(
    tmp_path: Path,
    executions: str | None,
    source: str | None,
    client: str | None,
    cells: list[str],
) -> None:
    store = new_store(tmp_path / "k-1")
    who_ran(store)
    selection = Selection.parse(executions, source, client)
    exported = notebook(store, SPEC, selection, 100)
    kept = ["reset" if c["cell_type"] == "markdown" else c["source"] for c in exported["cells"]]
    assert kept == cells
    assert exported["metadata"]["loomgate"]["selection"]["source"] == source


FORM = (
    "expected A:B, execution numbers, inclusive, either end optional, a negative end counting "
    "back from the last ('-10:' is the last ten, '5:8' is In [5] to In [8])"
)


@pytest.mark.parametrize(
    ("executions", "source", "message"),
    [
        ("5:2", None, f"executions '5:2' is not a selection; {FORM}"),
        ("last", None, f"executions 'last' is not a selection; {FORM}"),
        (
            None,
            "notebook",
            "source must be loomgate (cells sent through loomgate) or other (cells another "
            "Jupyter client sent), not 'notebook'",
        ),
    ],
)
def test_a_bad_selection_says_what_to_write(
    executions: str | None, source: str | None, message: str
) -> None:
    with pytest.raises(SelectionError) as refused:
        Selection.parse(executions, source)
    assert str(refused.value) == message


def test_empty_arguments_select_everything() -> None:
    assert Selection.parse("", "", "") == Selection()
    assert Selection.parse(None) == Selection()
    assert Selection.parse("-2:", "loomgate", "cli").described() == {
        "executions": "-2:",
        "source": "loomgate",
        "client": "cli",
    }
    assert Selection.parse("4").described() == {
        "executions": "4:4",
        "source": None,
        "client": None,
    }


async def test_records_from_before_restarts_were_noted_show_them_by_their_cells(
    tmp_path: Path,
) -> None:
    store = new_store(tmp_path / "k-1")
    killed_by_reset(store)
    del store.meta["restarts"]  # kernel.json as an older gateway wrote it
    cells = notebook(store, SPEC, Selection(), 100)["cells"]
    assert [c["cell_type"] for c in cells] == ["code", "markdown"]
    killed = store.all()[0].meta
    assert cells[1]["metadata"] == {
        "loomgate": {
            "restart": {"after": 1, "time": killed["finished"], "cause": "reset", "reason": None}
        }
    }
    assert cells[1]["source"].startswith("**The kernel was reset** here")


async def test_records_from_before_restarts_were_noted_show_a_death_by_its_cell(
    tmp_path: Path,
) -> None:
    store = new_store(tmp_path / "k-1")
    died(store)
    del store.meta["restarts"]
    cells = notebook(store, SPEC, Selection(), 100)["cells"]
    assert [c["cell_type"] for c in cells] == ["code", "markdown", "code"]
    first = store.all()[0].meta
    assert cells[1]["metadata"] == {
        "loomgate": {
            "restart": {
                "after": 1,
                "time": first["finished"],
                "cause": "died",
                "reason": "exited with code 3",
            }
        }
    }
    assert cells[1]["source"].startswith("**The kernel process died** here (exited with code 3)")


async def test_cells_notes_and_restarts_have_ids_and_metadata_of_their_own(
    tmp_path: Path,
) -> None:
    store = new_store(tmp_path / "k-1")
    cell(store, "1").set_state("completed")
    store.note_restart("reset")
    interrupted(store)
    store.note_restart("died", "exited with code 9")
    cells = notebook(store, SPEC, Selection(), 100)["cells"]
    assert [c["id"] for c in cells] == ["in-1", "restart-1", "in-2", "note-2", "restart-2"]
    restarts = store.meta["restarts"]
    assert cells[1]["metadata"] == {"loomgate": {"restart": restarts[0]}}
    assert cells[3]["metadata"] == {"loomgate": {"note_on": 2}}
    assert cells[4]["metadata"] == {"loomgate": {"restart": restarts[1]}}
    assert [r["cause"] for r in restarts] == ["reset", "died"]


async def test_the_cell_metadata_holds_the_whole_record(tmp_path: Path) -> None:
    store = new_store(tmp_path / "k-1")
    r = cell(store, "import os\nos._exit(3)", client="cli")
    r.write_stream("stdout", "going\n")
    r.note_gap(until=time.time() + 5)
    r.meta["unstored"] = Unstored(reason="No space left on device", from_line=2)
    r.write_error("SystemExit", "3", ["SystemExit: 3"])  # not stored: the disk refused it
    death = Death(reason="exited with code 3", restarted=True)
    r.set_state("died", died=death, note="restarted")
    meta = r.meta
    code = notebook(store, SPEC, Selection(), 100)["cells"][0]
    assert code["id"] == "in-1"
    assert code["metadata"] == {
        "execution": {
            "iopub.execute_input": iso(meta["started"]),
            "shell.execute_reply": iso(meta["finished"]),  # type: ignore[arg-type]
        },
        "tags": ["loomgate-died"],
        "loomgate": {
            "number": 1,
            "source": "loomgate",
            "client": "cli",
            "state": "died",
            "started": meta["started"],
            "finished": meta["finished"],
            "elapsed": meta["finished"] - meta["started"],  # type: ignore[operator]
            "error": {"name": "SystemExit", "value": "3"},
            "note": "restarted",
            "died": death,
            "gaps": meta["gaps"],
            "unstored": {"reason": "No space left on device", "from_line": 2},
            "lines": 1,
        },
    }
    assert len(meta["gaps"]) == 1


async def test_a_running_cell_has_no_end_time_and_its_elapsed_time_grows(tmp_path: Path) -> None:
    store = new_store(tmp_path / "k-1")
    running(store)
    started = store.all()[0].meta["started"]
    before = time.time()
    code = notebook(store, SPEC, Selection(), 100)["cells"][0]
    after = time.time()
    assert "execution" not in code["metadata"]
    assert code["metadata"]["loomgate"]["finished"] is None
    assert before - started <= code["metadata"]["loomgate"]["elapsed"] <= after - started


@pytest.mark.parametrize(
    ("moment", "written"),
    [
        (1_796_083_200.0, "2026-12-01T00:00:00Z"),
        (1_796_083_200.25, "2026-12-01T00:00:00.250000Z"),
        (0.0, "1970-01-01T00:00:00Z"),
    ],
)
def test_times_are_written_as_jupyter_writes_them(moment: float, written: str) -> None:
    assert iso(moment) == written


async def test_the_notebook_metadata_names_the_kernel_and_what_was_exported(
    tmp_path: Path,
) -> None:
    start = KernelStart(
        id="k-1",
        name="demo",
        lifetime="persistent",
        kernel_spec="python3",
        cwd="/home/ada/work",
        attached=None,
    )
    store = RecordStore.create(tmp_path / "k-1", start)
    store.mark_ended()
    before = time.time()
    exported = notebook(store, SPEC, Selection.parse("-3:", "other", None), 77)
    after = time.time()
    assert (exported["nbformat"], exported["nbformat_minor"]) == (4, 5)
    loomgate = exported["metadata"]["loomgate"]
    assert before <= loomgate.pop("exported") <= after
    assert loomgate == {
        "kernel": {
            "id": "k-1",
            "name": "demo",
            "cwd": "/home/ada/work",
            "created": store.meta["created"],
            "ended": store.meta["ended"],
        },
        "gateway_version": __version__,
        "selection": {"executions": "-3:", "source": "other", "client": None},
        "max_lines": 77,
    }


async def test_a_kernel_of_no_known_language_and_no_name(tmp_path: Path) -> None:
    start = KernelStart(
        id="k-2", name=None, lifetime="persistent", kernel_spec="x", cwd=None, attached=None
    )
    store = RecordStore.create(tmp_path / "k-2", start)
    long_output(store)
    spec = NotebookSpec(name="x", display_name="X", language=None)
    exported = notebook(store, spec, Selection(), 10)
    assert exported["metadata"]["kernelspec"] == {"name": "x", "display_name": "X"}
    assert exported["metadata"]["language_info"] == {"name": ""}
    note = exported["cells"][0]["outputs"][1]["data"]["text/plain"]
    assert note.endswith("loomgate output 1 --kernel k-2 --lines 6:25")  # named by its id
    nbformat.validate(nbformat.reads(notebook_file(exported), as_version=4))


async def test_the_file_is_the_notebook_as_jupyter_saves_it(tmp_path: Path) -> None:
    store = new_store(tmp_path / "k-1")
    r = cell(store, "print('héllo ✓')")
    r.write_stream("stdout", "héllo ✓\n")
    r.set_state("completed")
    text = notebook_file(notebook(store, SPEC, Selection(), 100))
    saved = nbformat.writes(nbformat.reads(text, as_version=4), split_lines=False)
    assert text == saved + "\n"
    assert "héllo ✓" in text  # UTF-8, not \u escapes


def test_the_media_type_and_the_default_limit_are_the_documented_ones() -> None:
    # docs/protocol.md promises both (the endpoint's tests start a gateway; these run without).
    assert MEDIA_TYPE == "application/x-ipynb+json"  # what Jupyter serves notebooks as
    assert DEFAULT_MAX_LINES == 10_000
