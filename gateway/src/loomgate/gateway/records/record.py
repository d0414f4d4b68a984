"""Execution records: the numbered, durable transcript of every cell a kernel runs.

Longer than 400 lines: a record's end commits its streams, journals the end and wakes its
waiters in one step, so its metadata, streams and lifecycle stay one object.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from loomgate.gateway.records.markup_text import readable_text
from loomgate.gateway.records.output_log import LineLog, OutputKind
from loomgate.gateway.records.output_stream import OutputStream
from loomgate.gateway.records.rich_outputs import RichOutputs, image_mime
from loomgate.gateway.records.stored_meta import (
    RECORD_FILE,
    RecordDetails,
    RecordMeta,
    new_record_meta,
    note_details,
    read_record_meta,
)
from loomgate.gateway.records.wakeups import Wakeups
from loomgate.shared.paths import write_json_atomic
from loomgate.shared.wire import (
    FINAL_STATES,
    STREAMS,
    Death,
    DroppedBy,
    ErrorInfo,
    Execution,
    ExecutionState,
    Gap,
    Returned,
    RichEntry,
    Source,
    StreamName,
    StreamSize,
    Unstored,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

FLUSH_DELAY = 0.2
LEFT_RUNNING = "the gateway stopped while this execution ran"  # a lost record's note
COLOURED_TRACEBACK = "traceback.ansi"  # the last error's traceback as the kernel coloured it
COLOURED_TRACEBACK_CHARS = 1 << 20
WRITE_SLICE = 1 << 20
STREAM_KIND = {"stdout": OutputKind.STDOUT, "stderr": OutputKind.STDERR}


def os_error_reason(error: OSError) -> str:
    """Return what went wrong in a failed file operation, without the path."""
    return error.strerror or str(error)


CLASS_REPR = re.compile(r"<class '([\w.]+)'>")


class ExecutionRecord:
    """One execution: its metadata, its five text streams and its rich outputs, on disk."""

    def __init__(
        self,
        directory: Path,
        meta: RecordMeta,
        on_storage_error: Callable[[OSError], None] | None = None,
        rich: list[RichEntry] | None = None,
    ) -> None:
        self.directory = directory
        self.meta = meta
        self.streams: dict[StreamName, OutputStream] = {}
        self.rich = RichOutputs(directory, rich if rich is not None else [])
        self.last_output: float = meta.get("last_output") or meta["started"]
        # The last moment a gateway was known to listen while this ran (its store sets it).
        self.left_seen = 0.0
        self._wakeups = Wakeups()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._save_pending = False
        self._close_pending = False
        # Streams a record made in this process never opened are empty: no need to look.
        self._created_here = False
        self.on_storage_error = on_storage_error
        self.on_end: Callable[[ExecutionRecord], None] | None = None  # the end made durable

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        *,
        kernel_id: str,
        number: int,
        msg_id: str,
        code: str,
        source: Source,
        client: str | None = None,
        on_storage_error: Callable[[OSError], None] | None = None,
    ) -> ExecutionRecord:
        """Return a new running record (the caller saves it with `save_soon`)."""
        meta = new_record_meta(kernel_id, number, msg_id, code, source, client, time.time())
        record = cls(directory, meta, on_storage_error)
        record._created_here = True
        record._store(lambda: directory.mkdir(parents=True, exist_ok=True))
        return record

    @classmethod
    def load(cls, directory: Path, *, running_ok: bool = False) -> ExecutionRecord:
        """Return the record stored in `directory`; one still running is now `lost`, unless
        `running_ok` (its kernel is being taken back, and decides)."""
        meta = read_record_meta(directory)
        record = cls(directory, meta, rich=RichOutputs.read_index(directory))
        if not record.final and not running_ok:
            record.end_unseen("lost", LEFT_RUNNING)
        return record

    def end_unseen(self, state: ExecutionState, note: str, died: Death | None = None) -> None:
        """End a record whose end no gateway saw (it was away): `lost`, or `died`."""
        self.meta["streams"] = self.stream_sizes()
        self.meta["state"] = state
        self.meta["note"], self.meta["input"] = note, None
        if died is not None:
            self.meta["died"] = died
        self.meta["finished"] = self.last_seen
        self.save()

    def note_dropped(self, messages: int, by: DroppedBy = "kernel") -> None:
        """Note that output after the last stored line may be missing: the kernel dropped
        `messages` of its messages (its IOPub publisher could not keep up), or the upstream
        server held some back (`by`, its rate limit: how many, 0, is not told)."""
        gap = Gap(
            after_line=self.log("combined").count,
            since=self.last_output,
            until=time.time(),
            dropped=messages,
            by=by,
        )
        self.meta["gaps"] = [*self.meta["gaps"], gap]
        self.save_soon()

    def note_gap(self, until: float) -> None:
        """Note that output after the last stored line, up to `until`, may be missing."""
        gap = Gap(after_line=self.log("combined").count, since=self.last_seen, until=until)
        self.meta["gaps"] = [*self.meta["gaps"], gap]
        self.save()

    # -- properties ---------------------------------------------------------------------------

    @property
    def last_seen(self) -> float:
        """Return the last moment this execution was known to run under a listening gateway:
        its last output, or the earlier gateway's last beat, whichever came later."""
        return max(self.last_output, self.left_seen)

    @property
    def number(self) -> int:
        """Return the execution number."""
        return self.meta["number"]

    @property
    def msg_id(self) -> str:
        """Return the msg_id of the execute_request this record follows."""
        return self.meta["msg_id"]

    @property
    def state(self) -> ExecutionState:
        """Return the lifecycle state."""
        return self.meta["state"]

    @property
    def final(self) -> bool:
        """Return whether the execution has ended."""
        return self.state in FINAL_STATES

    def log(self, stream: StreamName) -> LineLog:
        """Return the line log of `stream` (an empty one if nothing was written to it)."""
        if stream in self.streams:
            return self.streams[stream].log
        return LineLog(self.directory / stream)

    def _stream(self, name: StreamName) -> OutputStream:
        stream = self.streams.get(name)
        if stream is None:
            stream = self.streams[name] = OutputStream(LineLog(self.directory / name))
        return stream

    # -- writing output -----------------------------------------------------------------------

    def write_stream(self, name: str, text: str) -> None:
        """Append stdout/stderr text to its own stream and to `combined`."""
        kind = STREAM_KIND.get(name, OutputKind.STDOUT)

        def write() -> None:
            own = self._stream("stdout" if kind == OutputKind.STDOUT else "stderr")
            combined = self._stream("combined")
            # ipykernel may send hundreds of MB in one message; slicing keeps the line lists
            # and encoded copies small, so memory beyond the message itself stays bounded.
            for start in range(0, len(text), WRITE_SLICE):
                piece = text[start : start + WRITE_SLICE]
                own.write(piece)
                combined.write(piece, int(kind))

        self._store(write)
        self._output_arrived()

    def write_bundle(
        self, data: Mapping[str, object], metadata: Mapping[str, object], *, result: bool
    ) -> None:
        """Append an execute_result (`result`) or display_data bundle in IOPub order."""
        text = readable_text(data) or data.get("text/plain")
        image = image_mime(data)
        if not isinstance(text, str):
            text = f"<{image or next(iter(data), 'empty')} output>"
        if image is not None:
            kind = OutputKind.RICH
        else:
            kind = OutputKind.RESULT if result else OutputKind.DISPLAY

        def write() -> None:
            combined = self._stream("combined")
            combined.finish()
            first_line = combined.log.count + 1
            combined.write_block(text, int(kind))
            self._stream("result").write_block(text, int(kind))
            if any(mime != "text/plain" for mime in data):
                # The index names a line that is on disk: a gateway killed before its flush
                # would leave it naming a line the next gateway gives to later output.
                combined.log.flush()
                self.rich.save(data, metadata, first_line, result=result)

        self._store(write)
        self._output_arrived()

    def write_error(self, name: str, value: str, traceback: list[str]) -> None:
        """Record an error: its name and value, and its traceback text in order."""
        name = error_name(name)
        self.meta["error"] = ErrorInfo(name=name, value=value)
        text = "\n".join(traceback) if traceback else error_line(name, value)

        def write() -> None:
            self._stream("combined").write_block(text, int(OutputKind.ERROR))
            self._stream("traceback").write_block(text, int(OutputKind.ERROR))
            # The streams hold what a terminal shows; the colours are kept for the monitor.
            coloured = text[:COLOURED_TRACEBACK_CHARS]
            (self.directory / COLOURED_TRACEBACK).write_text(coloured, "utf-8", "replace")

        self._store(write)
        self._output_arrived()

    def coloured_traceback(self) -> str | None:
        """Return the last error's traceback with its ANSI colours, or None if it raised none."""
        try:
            return (self.directory / COLOURED_TRACEBACK).read_text("utf-8", "replace")
        except FileNotFoundError:
            return None

    def _store(self, write: Callable[[], None]) -> None:
        """Run `write` while output is stored; a write the disk refuses ends the storing."""
        if self.meta["unstored"] is not None:
            return  # noted once in `unstored`: from which line on, and why
        try:
            write()
        except OSError as error:
            self._storage_failed(error)

    def _storage_failed(self, error: OSError) -> None:
        """Note from which line on, and why, output is not stored; the cell runs on."""
        for stream in self.streams.values():
            with contextlib.suppress(OSError):  # each log keeps what it flushed whole
                stream.log.close()
        combined = self.streams.get("combined")
        self.meta["unstored"] = Unstored(
            reason=os_error_reason(error), from_line=(combined.log.count if combined else 0) + 1
        )
        if self.on_storage_error is not None:
            self.on_storage_error(error)

    def _output_arrived(self) -> None:
        self.last_output = time.time()
        if self.final:
            # Late output (a thread still printing after the cell ended): commit it at once.
            self._close_streams()
            self.save()
        elif self._flush_handle is None:
            # A crash of the gateway loses at most FLUSH_DELAY seconds of a running cell's output.
            self._flush_handle = asyncio.get_running_loop().call_later(FLUSH_DELAY, self.flush)

    # -- lifecycle ----------------------------------------------------------------------------

    def set_state(self, state: ExecutionState, **details: Unpack[RecordDetails]) -> None:
        """Move to `state`, storing `details` (input, died, note …), and wake waiters."""
        if self.final:
            return
        self.meta["state"] = state
        note_details(self.meta, details)
        if state in FINAL_STATES:
            # A lost execution ended unseen: its time ends at the last moment a gateway saw it.
            self.meta["finished"] = self.last_seen if state == "lost" else time.time()
            self.meta["input"] = None
            # Output and the end (a journal line) are on disk before a reply says the cell
            # ended; record.json follows (save_soon).
            self._commit_streams()
            self._close_pending = True
            if self.on_end is not None:
                self.on_end(self)
        self._wakeups.wake()
        self.save_soon()

    def amend(self, **details: Unpack[RecordDetails]) -> None:
        """Update details (died, note) of a record, also a finished one, and save it."""
        note_details(self.meta, details)
        self.save()

    def _commit_streams(self) -> None:
        """Commit each open stream's pending line and push all output to disk."""
        for stream in self.streams.values():
            self._store(stream.finish)
        self.flush()

    def _close_streams(self) -> None:
        """Commit and close the open streams, noting their final sizes in the metadata."""
        self._close_pending = False
        self._commit_streams()
        sizes = self.meta.setdefault("streams", {n: StreamSize(lines=0, bytes=0) for n in STREAMS})
        for name, stream in self.streams.items():
            with contextlib.suppress(OSError):  # already noted in `unstored`
                stream.log.close()
            sizes[name] = StreamSize(lines=stream.log.total, bytes=stream.log.byte_size)
        self.streams.clear()

    def flush(self) -> None:
        """Push buffered output to disk (readers in this process see it anyway)."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        for stream in self.streams.values():
            self._store(stream.log.flush)

    def save(self) -> None:
        """Write record.json now (a refused write is noted in `unstored`)."""
        self._save_pending = False
        if self._close_pending:  # the final sizes go in with it
            self._close_streams()
        try:
            self._write_meta()
        except OSError as error:
            if self.meta["unstored"] is None:
                self._storage_failed(error)

    def save_again(self) -> None:
        """Write record.json after the disk refused it; OSError if it still does."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._write_meta()

    def _write_meta(self) -> None:
        meta = {**self.meta, "last_output": self.last_output}  # last, unless loaded with it
        write_json_atomic(self.directory / RECORD_FILE, meta)

    def save_soon(self) -> None:
        """Save (closing a finished record's files first) after the callbacks queued (a reply)."""
        if not self._save_pending:
            self._save_pending = True
            asyncio.get_running_loop().call_soon(self._save_if_pending)

    def _save_if_pending(self) -> None:
        if self._save_pending:
            self.save()

    async def wait(self, timeout: float, until_silent: float | None = None) -> Returned:
        """Wait for the end, an input request, `until_silent` seconds of quiet or `timeout`;
        return which it was: "final", "input", "silent" or "timeout"."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            if self.final:
                return "final"
            if self.state == "awaiting_input":
                return "input"
            remaining = deadline - loop.time()
            reason: Returned = "timeout"
            if until_silent is not None:
                quiet_left = self.last_output + until_silent - time.time()
                if quiet_left <= remaining:
                    remaining, reason = quiet_left, "silent"
            if remaining <= 0:
                return reason
            await self._wakeups.next(remaining)

    # -- wire ---------------------------------------------------------------------------------

    def stream_sizes(self) -> dict[StreamName, StreamSize]:
        """Return the line and byte count of each stream (from disk for a finished record)."""
        if self.final and "streams" in self.meta:
            return self.meta["streams"]
        sizes: dict[StreamName, StreamSize] = {}
        for name in STREAMS:
            if self._created_here and name not in self.streams:
                sizes[name] = StreamSize(lines=0, bytes=0)
                continue
            log = self.log(name)
            sizes[name] = StreamSize(lines=log.total, bytes=log.byte_size)
        return sizes

    def summary(self) -> Execution:
        """Return the record's wire form: metadata plus line and byte counts of each stream."""
        meta = self.meta
        now = time.time()
        finished = meta["finished"]
        summary = Execution(
            kernel_id=meta["kernel_id"],
            number=self.number,
            state=self.state,
            source=meta["source"],
            client=meta.get("client"),
            code=meta["code"],
            started=meta["started"],
            finished=finished,
            elapsed=(finished or now) - meta["started"],
            error=meta["error"],
            input=meta["input"],
            died=meta["died"],
            note=meta["note"],
            unstored=meta.get("unstored"),
            gaps=list(meta["gaps"]),
            last_output=self.last_output,
            silent_for=max(0.0, now - self.last_output),
            streams=self.stream_sizes(),
            rich=list(self.rich.entries),
        )
        if "sandbox_failure" in meta:  # the rule the cell ran into in its kernel's sandbox
            summary["sandbox_failure"] = meta["sandbox_failure"]
        return summary


def error_name(name: str) -> str:
    """Return an error's name as a kernel should give it: xeus-python gives the class's repr
    (`<class 'ZeroDivisionError'>`), read as the class's name."""
    found = CLASS_REPR.fullmatch(name)
    return found.group(1) if found else name


def error_line(name: str, value: str) -> str:
    """Return the line an error without a traceback shows: its name and value, and what the
    kernel left out (bash_kernel names none: its value is the exit status)."""
    if name and value:
        return f"{name}: {value}"
    if name:
        return name
    if value:
        return f"error: {value} (the kernel named no error)"
    return "error (the kernel gave no name and no value)"
