"""Records → notebook cells, table-tested on real record stores (no kernel): what each kind of
output, each end and each loss of state becomes, every notebook validated by nbformat."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from loomgate.gateway.export.notebook import NotebookSpec, notebook, notebook_file
from loomgate.gateway.export.selection import Selection, SelectionError
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.records.stored_meta import KernelStart
from loomgate.shared.wire import Death, Source
from tests.support.cells import PNG_8X8

SPEC = NotebookSpec(name="python3", display_name="Python 3 (ipykernel)", language="python")
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


@pytest.mark.parametrize(
    ("executions", "source", "message"),
    [
        ("5:2", None, "executions '5:2' is not a selection; expected A:B"),
        ("last", None, "executions 'last' is not a selection"),
        (None, "notebook", "source must be loomgate (cells sent through loomgate) or other"),
    ],
)
def test_a_bad_selection_says_what_to_write(
    executions: str | None, source: str | None, message: str
) -> None:
    with pytest.raises(SelectionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Selection.parse(executions, source)


async def test_records_from_before_restarts_were_noted_show_them_by_their_cells(
    tmp_path: Path,
) -> None:
    store = new_store(tmp_path / "k-1")
    killed_by_reset(store)
    del store.meta["restarts"]  # kernel.json as an older gateway wrote it
    cells = notebook(store, SPEC, Selection(), 100)["cells"]
    assert [c["cell_type"] for c in cells] == ["code", "markdown"]
    assert cells[1]["source"].startswith("**The kernel was reset** here")
