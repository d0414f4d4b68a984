"""The agent's cell in a shared notebook, on real jupyter_ydoc documents (two of them, synced as
two collaborators are): the smallest edit of its outputs, its end, a person deleting, clearing
or running it again, and which kernels the event bus builds events for on its behalf."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from jupyter_ydoc import YNotebook

from loomgate.gateway.events import EventBus
from loomgate.gateway.live_cells import LiveCells
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.records.stored_meta import KernelStart
from loomgate.gateway.shared_cell import OutputEdit, SharedCell, output_edit


def stream(text: str, name: str = "stdout") -> dict[str, Any]:
    return {"output_type": "stream", "name": name, "text": text}


RESULT = {"output_type": "execute_result", "execution_count": 1, "data": {}, "metadata": {}}


@pytest.mark.parametrize(
    ("old", "new", "edit"),
    [
        ([], [], OutputEdit(0, None, [])),
        ([], [stream("a\n")], OutputEdit(0, None, [stream("a\n")])),
        ([stream("a\n")], [stream("a\nb\n")], OutputEdit(0, "b\n", [])),
        ([stream("a")], [stream("ab\n"), RESULT], OutputEdit(0, "b\n", [RESULT])),
        # stderr after stdout: stdout stays, stderr is new
        (
            [stream("a\n")],
            [stream("a\n"), stream("e\n", "stderr")],
            OutputEdit(1, None, [stream("e\n", "stderr")]),
        ),
        # a progress line rewritten (\r): not a prefix, replaced
        ([stream("10%")], [stream("20%")], OutputEdit(0, None, [stream("20%")])),
        # only the last output may grow
        (
            [stream("a\n"), stream("e\n", "stderr")],
            [stream("a\nb\n"), stream("e\n", "stderr")],
            OutputEdit(0, None, [stream("a\nb\n"), stream("e\n", "stderr")]),
        ),
        ([stream("a\n"), RESULT], [stream("a\n")], OutputEdit(1, None, [])),
    ],
)
def test_the_smallest_edit_of_a_cells_outputs(
    old: list[dict[str, Any]], new: list[dict[str, Any]], edit: OutputEdit
) -> None:
    assert output_edit(old, new) == edit


def synced_pair() -> tuple[YNotebook, YNotebook, list[bytes]]:
    """Return the server's notebook and a person's (synced by `sync`), and the updates
    loomgate's transactions on the server's make."""
    server, person = YNotebook(), YNotebook()
    server.set({"cells": [{"cell_type": "markdown", "source": "mine", "metadata": {}}]})
    sync(server, person)
    sent: list[bytes] = []
    server.ydoc.observe(lambda event: sent.append(event.update))
    return server, person, sent


def sync(*notebooks: YNotebook) -> None:
    """Exchange what each of two notebooks lacks, as their websocket would."""
    a, b = (n.ydoc for n in notebooks)
    b.apply_update(a.get_update(b.get_state()))
    a.apply_update(b.get_update(a.get_state()))


def test_a_cell_grows_by_its_new_text_and_survives_the_persons_edits() -> None:
    server, person, sent = synced_pair()
    meta = {"tags": ["loomgate-agent"], "loomgate": {"agent": True, "state": "running"}}
    cell = SharedCell.append(server, "loomgate-k-1", "print(1)", 1, meta, [], ended=False)
    sync(server, person)
    assert person.get_cell(1)["execution_count"] == 1
    assert person.ycells[1]["execution_state"] == "busy"
    long = "x" * 10_000 + "\n"
    assert cell.update([stream(long)])
    sent.clear()
    person.set_cell(0, source="mine, edited")  # the person, meanwhile, unsynced
    assert cell.update([stream(long + "more\n")])
    assert len(sent) == 1 and len(sent[0]) < 200  # the new text, not the whole output again
    sync(server, person)
    assert cell.update([stream(long + "more\n"), RESULT], state="completed")
    sync(server, person)
    seen = person.get()["cells"]
    assert seen[0]["source"] == "mine, edited"
    assert seen[1]["outputs"] == [stream(long + "more\n"), RESULT]
    assert seen[1]["metadata"]["loomgate"]["state"] == "completed"
    assert person.ycells[1]["execution_state"] == "idle"
    assert cell.transactions == 4


def test_a_cell_that_ended_before_it_was_added_is_added_whole() -> None:
    server, person, sent = synced_pair()
    SharedCell.append(server, "loomgate-k-3", "6 * 7", 3, {}, [RESULT], ended=True)
    sync(server, person)
    assert person.get_cell(1)["outputs"] == [RESULT]
    assert person.ycells[1]["execution_state"] == "idle"
    assert len(sent) == 1


def test_a_cell_the_person_deleted_is_not_written_again() -> None:
    server, person, _ = synced_pair()
    cell = SharedCell.append(server, "loomgate-k-2", "1", 2, {}, [], ended=False)
    sync(server, person)
    del person.ycells[1]
    sync(server, person)
    assert not cell.update([stream("late\n")])
    assert [c["source"] for c in server.get()["cells"]] == ["mine"]


def test_late_output_after_the_person_cleared_or_ran_the_cell_again() -> None:
    server, person, _ = synced_pair()
    cell = SharedCell.append(server, "loomgate-k-4", "go()", 4, {}, [stream("a\n")], ended=True)
    sync(server, person)
    person.ycells[1]["outputs"].clear()  # the person clears the cell's outputs
    sync(server, person)
    assert cell.update([stream("a\nlate\n")])  # written whole: there is nothing to grow
    sync(server, person)
    assert person.get_cell(1)["outputs"] == [stream("a\nlate\n")]
    person.ycells[1]["execution_count"] = 9  # the person runs it again: its outputs are theirs
    person.ycells[1]["outputs"].clear()
    sync(server, person)
    assert not cell.update([stream("a\nlate\nlater\n")])
    assert server.get_cell(1)["outputs"] == []


def new_store(directory: Path, kernel_id: str, paths: list[str]) -> RecordStore:
    """Return an empty store of a kernel used by the sessions `paths`."""
    start = KernelStart(
        id=kernel_id,
        name=None,
        lifetime="persistent",
        kernel_spec="python3",
        cwd=None,
        attached=None,
    )
    store = RecordStore.create(directory / kernel_id, start)
    store.note_paths(paths)
    return store


def test_only_kernels_that_serve_a_notebook_publish_for_live_cells(tmp_path: Path) -> None:
    stores = {
        kernel_id: new_store(tmp_path, kernel_id, paths)
        for kernel_id, paths in (("nb", ["work/a.ipynb"]), ("console", ["c.py"]), ("none", []))
    }
    live = LiveCells(stores, no_document, no_sessions, logging.getLogger("test"))
    events = EventBus()
    assert not events.has_subscribers("nb")
    live.attach(events)
    assert [k for k in ("nb", "console", "none", "gone") if events.has_subscribers(k)] == ["nb"]


async def no_document(path: str) -> None:
    return None


async def no_sessions(kernel_id: str) -> list[str]:
    return []


async def test_an_agents_execution_becomes_a_cell_the_notebooks_own_do_not(
    tmp_path: Path,
) -> None:
    store = new_store(tmp_path, "kernel-1", ["work/a.ipynb"])
    server, person, sent = synced_pair()
    opened: list[str] = []

    async def document(path: str) -> YNotebook | None:
        opened.append(path)
        return server if path == "work/a.ipynb" else None

    async def sessions(kernel_id: str) -> list[str]:
        return ["work/a.ipynb", "work/closed.ipynb", "console-1"]

    events = EventBus()
    LiveCells({"kernel-1": store}, document, sessions, logging.getLogger("test")).attach(events)
    theirs = store.new_record(number=1, msg_id="a", code="mine()", source="other", client=None)
    events.execution("kernel-1", theirs.summary())
    ours = store.new_record(number=2, msg_id="b", code="print(2)", source="loomgate", client="c")
    events.execution("kernel-1", ours.summary())
    for line in range(50):  # 50 lines, told as the tracker tells them: coalesced
        ours.write_stream("stdout", f"{line}\n")
        events.output("kernel-1", 2, line + 1, str(line))
    await until(lambda: sync(server, person) or len(person.get()["cells"]) == 2)
    assert opened == ["work/a.ipynb", "work/closed.ipynb"]  # a console is no notebook
    ours.set_state("completed")
    events.execution("kernel-1", ours.summary())
    await until(
        lambda: (
            sync(server, person)
            or person.get()["cells"][1]["metadata"]["loomgate"]["state"] == "completed"
        )
    )
    cell = person.get()["cells"][1]
    assert cell["source"] == "print(2)" and cell["execution_count"] == 2
    assert cell["outputs"] == [stream("".join(f"{i}\n" for i in range(50)))]
    assert cell["metadata"]["loomgate"] == {
        "agent": True,
        "number": 2,
        "client": "c",
        "kernel_id": "kernel-1",
        "state": "completed",
    }
    assert len(sent) <= 4  # appended, at most two updates of its outputs, its end
    ours.write_stream("stdout", "late\n")  # a thread of the cell's, printing after its end
    events.output("kernel-1", 2, 51, "late")
    await until(
        lambda: (
            sync(server, person)
            or person.get()["cells"][1]["outputs"][0]["text"].endswith("49\nlate\n")
        )
    )
    assert person.get()["cells"][1]["metadata"]["loomgate"]["state"] == "completed"


async def until(check: Any) -> None:
    """Return once `check()` is true (the live cells' updates run on the loop)."""
    deadline = asyncio.get_running_loop().time() + 5
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "never happened"
        await asyncio.sleep(0.01)  # the updates are timers on this loop: nothing to wait on
