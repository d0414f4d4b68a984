"""A kernel's journal: one appended line for each fact a client is about to be told before its
record.json says it, so that a gateway killed in between leaves it on disk for the next one.

Today's facts: an execution's end (state, error, note, death, stream sizes, finish time). A
line is one `write` on a file opened for appending, so a SIGKILL of the gateway leaves either
the whole line or none; the next gateway applies each end to a record still `running` and
ignores a line it cannot read.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

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


class Journal:
    """The append-only journal of one kernel's record directory."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / JOURNAL_FILE
        self._fd: int | None = None

    def append(self, entry: Mapping[str, object]) -> None:
        """Add `entry` as one line, in one write (OSError if the disk refuses it)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(self._fd, json.dumps(entry, separators=(",", ":")).encode() + b"\n")

    def ends(self) -> dict[int, EndEntry]:
        """Return each execution end the journal holds, by number (the last one wins)."""
        ends: dict[int, EndEntry] = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return ends
        for line in data.splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and isinstance(entry.get("end"), int):
                    ends[entry["end"]] = EndEntry(**entry)  # type: ignore[typeddict-item]
        return ends

    def close(self) -> None:
        """Close the journal's file (a later append opens it again)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
