"""A kernel's journal: one appended line for each fact a client is about to be told before its
record.json says it, so that a gateway killed in between leaves it on disk for the next one.

The facts: a cell sent to the kernel (its msg_id, code and sender, before it is sent), and an
execution's end (state, error, note, death, stream sizes, finish time, before its reply). A
line is one `write` on a file opened for appending (json_lines.py), so a SIGKILL of the gateway
leaves the whole line, none, or (a full disk) a torn one the next line does not join; the next
gateway applies each end to a record still `running` and ignores a line it cannot read.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict, cast

from loomgate.gateway.records.json_lines import JsonLines
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.shared.wire import (
    Death,
    ErrorInfo,
    ExecutionState,
    SandboxFailure,
    StreamName,
    StreamSize,
)

JOURNAL_FILE = "journal.jsonl"


class EndEntry(TypedDict, total=False):
    """How an execution ended, as its reply says it."""

    end: int  # the execution number
    state: ExecutionState
    finished: float
    last_output: float
    error: ErrorInfo | None
    note: str | None
    died: Death | None
    sandbox_failure: SandboxFailure
    streams: dict[StreamName, StreamSize]


class SentEntry(TypedDict):
    """A cell sent to the kernel, before the kernel has announced it."""

    sent: str  # its msg_id
    code: str
    client: str | None
    time: float


class Journal:
    """The append-only journal of one kernel's record directory."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / JOURNAL_FILE
        self.lines = JsonLines(self.path)

    def append(self, entry: Mapping[str, object]) -> None:
        """Add `entry` as one line, in one write (OSError if the disk refuses it)."""
        self.lines.append(entry)

    def entries(self) -> list[dict[str, object]]:
        """Return every whole line of the journal, oldest first."""
        return self.lines.read()

    def ends(self) -> dict[int, EndEntry]:
        """Return each execution end the journal holds, by number (the last one wins)."""
        ends: dict[int, EndEntry] = {}
        for entry in self.entries():
            number = entry.get("end")
            if isinstance(number, int):
                ends[number] = cast(EndEntry, entry)
        return ends

    def sends(self) -> list[SentEntry]:
        """Return each cell the journal says was sent, oldest first."""
        return [
            cast(SentEntry, entry)
            for entry in self.entries()
            if isinstance(entry.get("sent"), str) and isinstance(entry.get("code"), str)
        ]


def end_entry(record: ExecutionRecord) -> EndEntry:
    """Return how the finished `record` ended, as a journal line."""
    meta = record.meta
    entry = EndEntry(
        end=record.number,
        state=meta["state"],
        finished=meta["finished"] or time.time(),
        last_output=record.last_output,
        error=meta["error"],
        note=meta["note"],
        died=meta["died"],
        streams=dict(record.stream_sizes()),
    )
    if "sandbox_failure" in meta:
        entry["sandbox_failure"] = meta["sandbox_failure"]
    return entry


def end_as_journalled(record: ExecutionRecord, ended: EndEntry) -> None:
    """End a record still `running` on disk as its journal says its reply told."""
    meta = record.meta
    meta["state"] = ended["state"]
    meta["finished"] = ended.get("finished")
    meta["error"] = ended.get("error")
    meta["note"] = ended.get("note")
    meta["died"] = ended.get("died")
    meta["input"] = None
    if "sandbox_failure" in ended:
        meta["sandbox_failure"] = ended["sandbox_failure"]
    if "streams" in ended:
        meta["streams"] = dict(ended["streams"])
    record.last_output = ended.get("last_output", record.last_output)
    record.save()
