"""kernel.json and record.json across gateway versions: what older gateways wrote still loads,
and what this one writes has the keys, values and order the older ones wrote."""

from __future__ import annotations

import base64
import json
import shutil
import time
from pathlib import Path

import pytest

from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.shared.wire import Death
from tests.support.records import kernel_store

DATA = Path(__file__).parent.parent / "data"
# Written by `write_kernel_records` with the gateway of b7c750d, whose record and kernel
# metadata were untyped dicts; kept as it was, so that every later gateway still reads it.
FORMAT_1 = DATA / "records-format-1"
KERNEL_ID = "5f0c2a4e-3b1d-4c8e-9a7f-2d6b8e1c0a93"
# Keys whose values are times: they differ between two writes, their place and type do not.
TIMES = {"started", "finished", "last_output", "interrupt_requested", "created", "ended"}


async def write_kernel_records(directory: Path) -> None:
    """Write a gone kernel's records: a completed cell with a rich output, an interrupted one,
    one that died while waiting for input (with a gap), and one left running."""
    store = kernel_store(
        directory, kernel_id=KERNEL_ID, name="fixture", kernel_spec="python3", cwd="/tmp"
    )
    store.meta["implementation"] = "ipython"
    store.meta["setup"] = {
        "parts": [{"name": "startup.py", "code": "x = 1"}],
        "results": [{"name": "startup.py", "state": "ok", "output": "", "failure": None}],
    }
    store.note_paths(["notebooks/a.ipynb"])
    first = store.new_record(
        number=1, msg_id="msg-1", code="print('hi')\n1", source="loomgate", client="mcp"
    )
    first.write_stream("stdout", "hi\n")
    first.write_stream("stderr", "warn\n")
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    first.write_bundle({"image/png": png, "text/plain": "<Figure>"}, {"width": 4}, result=False)
    first.write_bundle({"text/plain": "1"}, {}, result=True)
    first.set_state("completed")
    first.save()
    second = store.new_record(number=2, msg_id="msg-2", code="while True: pass", source="other")
    second.meta["interrupt_requested"] = time.time()
    second.write_error("KeyboardInterrupt", "", ["\x1b[31mKeyboardInterrupt\x1b[0m"])
    second.set_state("interrupted")
    second.save()
    third = store.new_record(
        number=3, msg_id="msg-3", code="input('name? ')", source="loomgate", client="cli"
    )
    third.set_state("awaiting_input", input={"prompt": "name? ", "password": False})
    third.write_stream("stdout", "partial")
    third.flush()
    third.save()
    third.note_gap(until=time.time())
    third.end_unseen(
        "died", "the kernel process is gone", died=Death(reason="killed", restarted=False)
    )
    third.amend(
        died={"reason": "killed", "restarted": True},
        note="the kernel was restarted; its state is gone",
    )
    fourth = store.new_record(
        number=4, msg_id="msg-4", code="import time; time.sleep(99)", source="loomgate"
    )
    fourth.write_stream("stdout", "started\n")
    fourth.flush()
    fourth.save()  # left running: the next gateway reads it as lost
    store.mark_ended("the kernel process is gone")


def files(directory: Path) -> dict[str, Path]:
    """Return the files under `directory` by their relative path."""
    return {str(p.relative_to(directory)): p for p in sorted(directory.rglob("*")) if p.is_file()}


def shape(value: object) -> object:
    """Return `value` with each time replaced by its type, keys kept in their order."""
    if isinstance(value, dict):
        return [
            (key, type(item).__name__ if key in TIMES or key in ("since", "until") else shape(item))
            for key, item in value.items()
        ]
    if isinstance(value, list):
        return [shape(item) for item in value]
    return value


@pytest.fixture
def format_1(tmp_path: Path) -> Path:
    """Return a copy of the kernel records an older gateway wrote."""
    return Path(shutil.copytree(FORMAT_1, tmp_path / KERNEL_ID))


async def test_records_written_now_have_the_shape_older_gateways_wrote(tmp_path: Path) -> None:
    await write_kernel_records(tmp_path / "now")
    now, then = files(tmp_path / "now"), files(FORMAT_1)
    # The journal is new (records/journal.py): an older gateway has none, and needs none.
    journal = now.pop("journal.jsonl")
    ends = [json.loads(line)["end"] for line in journal.read_text().splitlines()]
    assert ends == sorted(ends) and ends
    assert sorted(now) == sorted(then)
    for name, path in then.items():
        if name.endswith(".json") and name != "1/rich/0.json":
            written, kept = json.loads(now[name].read_text()), json.loads(path.read_text())
            assert shape(written) == shape(kept), name
        else:
            assert now[name].read_bytes() == path.read_bytes(), name


def test_an_older_gateways_kernel_records_load(format_1: Path) -> None:
    store = RecordStore.load(format_1)
    kernel = store.model()
    assert (kernel["id"], kernel["name"], kernel["kernel_spec"]) == (
        KERNEL_ID,
        "fixture",
        "python3",
    )
    assert (kernel["state"], kernel["executions"], kernel["last_execution"]) == ("gone", 4, 4)
    assert kernel["end_reason"] == "the kernel process is gone"
    assert kernel["paths"] == ["notebooks/a.ipynb"]
    assert kernel["implementation"] == "ipython"
    assert kernel["setup"]["parts"] == ["startup.py"]
    assert kernel["setup"]["results"][0]["state"] == "ok"
    assert kernel["cwd"] == "/tmp" and kernel["attached"] is None
    states = {record.number: record.state for record in store.all()}
    assert states == {1: "completed", 2: "interrupted", 3: "died", 4: "lost"}


def test_an_older_gateways_records_keep_their_details(format_1: Path) -> None:
    store = RecordStore.load(format_1)
    first, second, third, fourth = (store.get(n) for n in (1, 2, 3, 4))
    assert first is not None and second is not None and third is not None and fourth is not None
    summary = first.summary()
    assert (summary["source"], summary["client"], summary["code"]) == (
        "loomgate",
        "mcp",
        "print('hi')\n1",
    )
    assert summary["streams"]["combined"] == {"lines": 4, "bytes": 19}
    assert [(r["index"], r["line"], r["mimetypes"]) for r in summary["rich"]] == [
        (0, 3, ["image/png", "text/plain"])
    ]
    assert first.rich.bundle(0)["metadata"] == {"width": 4}
    assert [line.text for line in first.log("stdout").read(0, 5)] == ["hi"]
    assert second.summary()["error"] == {"name": "KeyboardInterrupt", "value": ""}
    assert second.meta["interrupt_requested"] > second.meta["started"]
    assert second.coloured_traceback() == "\x1b[31mKeyboardInterrupt\x1b[0m"
    died = third.summary()
    assert died["died"] == {"reason": "killed", "restarted": True}
    assert died["note"] == "the kernel was restarted; its state is gone"
    assert [gap["after_line"] for gap in died["gaps"]] == [0]
    lost = fourth.summary()
    assert lost["note"] == "the gateway stopped while this execution ran"
    assert lost["finished"] == lost["last_output"]
    assert lost["streams"]["stdout"] == {"lines": 1, "bytes": 8}


@pytest.mark.parametrize("number", [1, 2, 3])
def test_a_finished_record_saved_again_is_unchanged(format_1: Path, number: int) -> None:
    path = format_1 / str(number) / "record.json"
    before = path.read_bytes()
    ExecutionRecord.load(path.parent).save()
    assert path.read_bytes() == before


def test_kernel_json_saved_again_is_unchanged(format_1: Path) -> None:
    path = format_1 / "kernel.json"
    before = path.read_bytes()
    RecordStore.load(format_1).save()
    assert path.read_bytes() == before


def test_a_record_from_before_unstored_and_gaps_loads_with_their_defaults(
    format_1: Path,
) -> None:
    path = format_1 / "1" / "record.json"
    meta = json.loads(path.read_text())
    del meta["unstored"], meta["gaps"]
    path.write_text(json.dumps(meta))
    summary = ExecutionRecord.load(path.parent).summary()
    assert summary["unstored"] is None and summary["gaps"] == []
    assert summary["state"] == "completed"


def test_a_kernel_json_of_the_first_gateways_loads_with_its_defaults(format_1: Path) -> None:
    path = format_1 / "kernel.json"
    meta = json.loads(path.read_text())
    for key in ("attached", "implementation", "paths", "setup", "end_reason"):
        del meta[key]
    path.write_text(json.dumps(meta))
    kernel = RecordStore.load(format_1).model()
    assert kernel["attached"] is None and kernel["end_reason"] is None
    assert (kernel["implementation"], kernel["paths"]) == ("", [])
    assert kernel["setup"] == {"parts": [], "results": []}
