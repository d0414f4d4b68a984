"""A kernel's journal, in one process: its lines, a line a kill or a full disk cut short, the
ends it keeps and how a record still `running` on disk is ended by one."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from loomgate.gateway.records.journal import (
    JOURNAL_FILE,
    EndEntry,
    Journal,
    end_as_journalled,
    end_entry,
)
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.shared.wire import Death, ErrorInfo, StreamSize

SENT = {"sent": "m1", "code": "n += 1", "client": "c", "time": 1.5}


def new_record(directory: Path, number: int = 3) -> ExecutionRecord:
    """Return a running record numbered `number`, its record.json written."""
    record = ExecutionRecord.create(
        directory, kernel_id="k", number=number, msg_id="m", code="1", source="loomgate"
    )
    record.save()
    return record


def stored(directory: Path) -> dict[str, object]:
    """Return the record.json in `directory`."""
    return json.loads((directory / "record.json").read_text())  # type: ignore[no-any-return]


def test_each_entry_is_one_compact_line_of_a_private_file(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append(SENT)
    journal.append({"end": 1, "state": "completed"})
    path = tmp_path / JOURNAL_FILE
    assert journal.path == path
    assert path.read_bytes() == (
        b'{"sent":"m1","code":"n += 1","client":"c","time":1.5}\n{"end":1,"state":"completed"}\n'
    )
    assert path.stat().st_mode & 0o777 == 0o600
    assert journal.entries() == [SENT, {"end": 1, "state": "completed"}]


def test_a_missing_journal_has_no_entries(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    assert journal.entries() == []
    assert journal.ends() == {}
    assert journal.sends() == []


def test_lines_that_are_not_whole_objects_are_skipped(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_FILE).write_bytes(
        b'{"end":1,"state":"completed"}\n'
        b"[1, 2]\n"  # JSON, but no entry
        b'"text"\n'
        b"\xff\xfe\n"  # not UTF-8
        b"\n"
        b'{"sent":"m2","code":"x","client":null,"time":2.0}\n'
        b'{"end":2,"sta'  # cut short by a kill or a full disk
    )
    entries = Journal(tmp_path).entries()
    assert entries == [
        {"end": 1, "state": "completed"},
        {"sent": "m2", "code": "x", "client": None, "time": 2.0},
    ]


@pytest.mark.parametrize("torn", [b'{"end":2,"sta', b'{"sent":"m9","code":"print(', b"{"])
def test_a_line_appended_after_a_torn_one_is_kept(tmp_path: Path, torn: bytes) -> None:
    """A gateway killed mid-write (or a full disk) leaves the last line cut short; the next
    gateway's first line starts on a line of its own, so it is not lost with the torn one."""
    (tmp_path / JOURNAL_FILE).write_bytes(b'{"end":1,"state":"completed"}\n' + torn)
    journal = Journal(tmp_path)
    journal.append(SENT)
    journal.append({"end": 2, "state": "error"})
    assert journal.entries() == [
        {"end": 1, "state": "completed"},
        SENT,
        {"end": 2, "state": "error"},
    ]
    assert (tmp_path / JOURNAL_FILE).read_bytes().count(b"\n") == 4  # one newline added, once


def test_a_whole_journal_gets_no_blank_line(tmp_path: Path) -> None:
    (tmp_path / JOURNAL_FILE).write_bytes(b'{"end":1,"state":"completed"}\n')
    Journal(tmp_path).append(SENT)
    assert (tmp_path / JOURNAL_FILE).read_bytes().split(b"\n") == [
        b'{"end":1,"state":"completed"}',
        b'{"sent":"m1","code":"n += 1","client":"c","time":1.5}',
        b"",
    ]


def test_ends_by_number_the_last_one_winning(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append({"end": 1, "state": "completed"})
    journal.append({"end": "2", "state": "error"})  # not a number: no end
    journal.append(SENT)
    journal.append({"end": 1, "state": "died"})
    journal.append({"end": 4, "state": "interrupted"})
    assert journal.ends() == {1: {"end": 1, "state": "died"}, 4: {"end": 4, "state": "interrupted"}}


def test_sends_need_a_msg_id_and_code_that_are_strings(tmp_path: Path) -> None:
    journal = Journal(tmp_path)
    journal.append(SENT)
    journal.append({"sent": 7, "code": "x", "client": None, "time": 1.0})
    journal.append({"sent": "m3", "code": None, "client": None, "time": 1.0})
    journal.append({"sent": "m4", "client": None, "time": 1.0})
    journal.append({"end": 1, "state": "completed"})
    journal.append({"sent": "m5", "code": "", "client": None, "time": 3.0})
    assert journal.sends() == [SENT, {"sent": "m5", "code": "", "client": None, "time": 3.0}]


async def test_an_end_entry_says_how_the_record_ended(tmp_path: Path) -> None:
    record = new_record(tmp_path / "3")
    record.write_stream("stdout", "a\nb\n")
    record.last_output = 12.5
    record.meta["state"] = "error"
    record.meta["finished"] = 20.0
    record.meta["error"] = ErrorInfo(name="ValueError", value="bad")
    record.meta["note"] = "a note"
    record.meta["died"] = Death(reason="SIGKILL", restarted=False)
    entry = end_entry(record)
    assert entry == {
        "end": 3,
        "state": "error",
        "finished": 20.0,
        "last_output": 12.5,
        "error": {"name": "ValueError", "value": "bad"},
        "note": "a note",
        "died": {"reason": "SIGKILL", "restarted": False},
        "streams": {
            "stdout": {"lines": 2, "bytes": 4},
            "stderr": {"lines": 0, "bytes": 0},
            "combined": {"lines": 2, "bytes": 4},
            "result": {"lines": 0, "bytes": 0},
            "traceback": {"lines": 0, "bytes": 0},
        },
    }
    record.meta["sandbox_failure"] = {"rule": "network"}  # type: ignore[typeddict-item]
    assert end_entry(record)["sandbox_failure"] == {"rule": "network"}


def test_an_end_entry_without_a_finish_time_takes_now(tmp_path: Path) -> None:
    record = new_record(tmp_path / "3")
    record.meta["state"] = "completed"
    before = __import__("time").time()
    entry = end_entry(record)
    assert before <= entry["finished"] <= __import__("time").time()
    assert "sandbox_failure" not in entry


def test_a_running_record_is_ended_as_journalled(tmp_path: Path) -> None:
    record = new_record(tmp_path / "3")
    record.meta["input"] = {"prompt": "?", "password": False}
    record.meta["note"] = "was running"
    sizes = {"stdout": StreamSize(lines=2, bytes=4)}
    ended = EndEntry(
        end=3,
        state="error",
        finished=20.0,
        last_output=12.5,
        error=ErrorInfo(name="E", value="v"),
        note=None,
        died=None,
        streams=sizes,  # type: ignore[typeddict-item]
        sandbox_failure={"rule": "network"},  # type: ignore[typeddict-item]
    )
    end_as_journalled(record, ended)
    for meta in (record.meta, stored(record.directory)):
        assert meta["state"] == "error"
        assert meta["finished"] == 20.0
        assert meta["error"] == {"name": "E", "value": "v"}
        assert meta["note"] is None
        assert meta["died"] is None
        assert meta["input"] is None
        assert meta["streams"] == {"stdout": {"lines": 2, "bytes": 4}}
        assert meta["sandbox_failure"] == {"rule": "network"}
    assert record.last_output == 12.5
    assert stored(record.directory)["last_output"] == 12.5
    assert record.final


def test_an_end_with_a_note_and_a_death_gives_the_record_both(tmp_path: Path) -> None:
    record = new_record(tmp_path / "3")
    ended = EndEntry(
        end=3,
        state="died",
        finished=21.0,
        error=None,
        note="the kernel died",
        died=Death(reason="SIGKILL", restarted=True),
    )
    end_as_journalled(record, ended)
    for meta in (record.meta, stored(record.directory)):
        assert meta["state"] == "died"
        assert meta["note"] == "the kernel died"
        assert meta["died"] == {"reason": "SIGKILL", "restarted": True}


def test_an_old_end_line_without_the_optional_keys_keeps_what_the_record_has(
    tmp_path: Path,
) -> None:
    record = new_record(tmp_path / "3")
    record.last_output = 9.0
    record.meta["note"] = "kept?"
    end_as_journalled(record, EndEntry(end=3, state="completed"))
    assert record.meta["state"] == "completed"
    assert record.meta["finished"] is None
    assert record.meta["note"] is None  # the end said nothing: no note
    assert "streams" not in record.meta
    assert "sandbox_failure" not in record.meta
    assert record.last_output == 9.0
    assert stored(record.directory)["state"] == "completed"


@contextlib.contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Let this process write files up to `limit` bytes only, as a nearly full disk would: a
    write across the limit is cut short, one at it fails (SIGXFSZ ignored meanwhile)."""
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, before)
        signal.signal(signal.SIGXFSZ, handler)


def test_a_line_the_disk_took_only_part_of_fails_and_the_next_starts_afresh(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path)
    journal.append({"end": 1, "state": "completed"})  # 30 bytes
    with file_size_limit(40), pytest.raises(OSError) as refused:
        journal.append(SENT)  # 55 bytes: 10 of them fit
    assert refused.value.errno == errno.ENOSPC
    assert refused.value.strerror == os.strerror(errno.ENOSPC)
    assert refused.value.filename == str(tmp_path / JOURNAL_FILE)
    assert (tmp_path / JOURNAL_FILE).stat().st_size == 40  # a torn line, as a full disk leaves
    with file_size_limit(40), pytest.raises(OSError):
        journal.append(SENT)  # nothing fits now
    journal.append({"end": 2, "state": "error"})  # the disk has room again
    assert journal.entries() == [{"end": 1, "state": "completed"}, {"end": 2, "state": "error"}]
