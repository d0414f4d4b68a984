"""An execution record's life in one process: waiting on it, ending it, and what reaches disk."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from loomgate.gateway.records.output_log import LineLog
from loomgate.gateway.records.record import ExecutionRecord


def new_record(directory: Path) -> ExecutionRecord:
    """Return a running record numbered 1 in `directory`."""
    return ExecutionRecord.create(
        directory, kernel_id="k", number=1, msg_id="m", code="print('hi')", source="loomgate"
    )


def on_disk(directory: Path) -> dict[str, object]:
    """Return the record.json in `directory`."""
    return json.loads((directory / "record.json").read_text())  # type: ignore[no-any-return]


async def test_a_waiter_reads_the_ended_record_before_it_is_closed_and_saved(
    tmp_path: Path,
) -> None:
    """The output is on disk when a long poll learns the end; closing the streams and writing
    record.json follow its reply, and agree with what the reply saw."""
    record = new_record(tmp_path / "1")
    record.save()
    record.write_stream("stdout", "hi\nthere")  # "there" is pending: no newline yet
    seen: dict[str, object] = {}

    async def long_poll() -> None:
        seen["returned"] = await record.wait(timeout=30)
        seen["on_disk"] = on_disk(record.directory)["state"]
        seen["lines on disk"] = [x.text for x in LineLog(record.directory / "stdout").read(0, 9)]
        seen["streams open"] = sorted(record.streams)
        seen["summary"] = record.summary()["streams"]

    waiting = asyncio.create_task(long_poll())
    await asyncio.sleep(0)  # the long poll is waiting
    record.set_state("completed")
    await asyncio.wait_for(waiting, 10)
    assert seen["returned"] == "final"
    assert seen["on_disk"] == "running"
    assert seen["streams open"] == ["combined", "stdout"]
    assert seen["lines on disk"] == ["hi", "there"]  # what the reply shows survives a crash
    for _ in range(3):  # the save queued behind the wake-up
        await asyncio.sleep(0)
    saved = on_disk(record.directory)
    assert saved["state"] == "completed"
    assert record.streams == {}
    assert saved["streams"] == seen["summary"]
    assert saved["streams"]["stdout"] == {"lines": 2, "bytes": 9}  # type: ignore[index]
    assert record.log("combined").read(0, 5)[1].text == "there"


@pytest.mark.parametrize(
    ("until_silent", "expected"), [(None, "timeout"), (0.05, "silent")], ids=["time", "quiet"]
)
async def test_a_waiter_returns_at_its_time(
    tmp_path: Path, until_silent: float | None, expected: str
) -> None:
    """Nothing happens: the long poll returns at its own time, saying why."""
    record = new_record(tmp_path / "1")
    assert await record.wait(timeout=0.1, until_silent=until_silent) == expected
    assert record.state == "running"


async def test_a_fresh_record_counts_unwritten_streams_as_empty(tmp_path: Path) -> None:
    """Streams never written have no files and count zero, before and after the end."""
    record = new_record(tmp_path / "1")
    record.write_bundle({"text/plain": "2"}, {}, result=True)
    sizes = record.summary()["streams"]
    assert sizes["result"] == {"lines": 1, "bytes": 2}
    assert sizes["stdout"] == sizes["stderr"] == sizes["traceback"] == {"lines": 0, "bytes": 0}
    record.set_state("completed")
    record.save()
    assert on_disk(record.directory)["streams"] == sizes
    assert not (record.directory / "stdout.txt").exists()
    assert ExecutionRecord.load(record.directory).summary()["streams"] == sizes


async def test_output_after_the_end_is_kept(tmp_path: Path) -> None:
    """A thread that prints after its cell ended: the line is committed and saved at once."""
    record = new_record(tmp_path / "1")
    record.set_state("completed")
    record.write_stream("stdout", "late\n")
    assert on_disk(record.directory)["streams"]["stdout"]["lines"] == 1  # type: ignore[index]
    reloaded = ExecutionRecord.load(record.directory)
    assert reloaded.log("stdout").read(0, 1)[0].text == "late"
