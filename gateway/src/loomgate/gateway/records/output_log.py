"""Append-only on-disk line logs: each line's text, with an offset index holding its tag."""

from __future__ import annotations

import contextlib
import enum
import operator
import os
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from pathlib import Path
from typing import BinaryIO


class OutputKind(enum.IntEnum):
    """What produced a line of the `combined` stream (stored as the line's tag)."""

    STDOUT = 1
    STDERR = 2
    RESULT = 3  # text/plain of an execute_result: the only output labelled Out[N]
    DISPLAY = 4  # text/plain of a display_data without a rich (image) part
    ERROR = 5  # traceback lines of an error
    RICH = 6  # text/plain stand-in of a display_data/execute_result that carries an image


PART_START = 0x80  # tag flag: this line starts a new output (a new result/display/error)
KIND_MASK = 0x7F

_OFFSET_BITS = 56
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
_ENTRY = 8  # bytes per index entry: array("Q") item
_INDEX_FLUSH_ENTRIES = 8192  # index entries kept in memory before they are written out
_DATA_BUFFER = 1 << 16
_MIRROR_BYTES = 1 << 16  # a log begun empty here is read from memory while this small
_SCAN_BLOCK = 1 << 16  # bytes read at a time when checking a log reopened after a crash
_NATIVE_LITTLE_ENDIAN = sys.byteorder == "little"

assert array("Q").itemsize == _ENTRY


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a log: its 1-based number, text and tag."""

    number: int
    text: str
    tag: int = 0
    partial: bool = False  # True for the unfinished pending line of a live log


def _decode(data: bytes) -> list[str]:
    """Return the lines of a span of "\\n"-terminated UTF-8 lines."""
    return data.decode("utf-8", errors="replace").split("\n")[:-1]


def _read_at(file: BinaryIO, offset: int, size: int) -> bytes:
    """Return `size` bytes of `file` starting at `offset` (fewer only at end of file)."""
    file.seek(offset)
    return file.read(size)


def _entries(raw: bytes) -> array[int]:
    """Return the index entries packed little-endian in `raw`."""
    entries = array("Q")
    entries.frombytes(raw)
    if not _NATIVE_LITTLE_ENDIAN:
        entries.byteswap()
    return entries


def _packed(entries: array[int]) -> bytes:
    """Return index entries packed little-endian."""
    if _NATIVE_LITTLE_ENDIAN:
        return entries.tobytes()
    swapped = array("Q", entries)
    swapped.byteswap()
    return swapped.tobytes()


class LineLog:
    """Lines stored in `<stem>.txt`, with `<stem>.idx` holding each line's offset and tag."""

    def __init__(self, stem: Path) -> None:
        self._data_path = Path(f"{stem}.txt")
        self._index_path = Path(f"{stem}.idx")
        self._data_writer: BinaryIO | None = None
        self._index_writer: BinaryIO | None = None
        self._data_reader: BinaryIO | None = None
        self._index_reader: BinaryIO | None = None
        self._unwritten = array("Q")  # index entries whose data is not yet flushed
        self._dirty = False
        self._pending: str | Callable[[], str] | None = None
        self._pending_tag = 0
        self._count, self._size = self._recover()
        self._durable = (self._count, self._size)  # what the files hold for certain
        # A copy of a small log's data and index entries: its reads open no file.
        self._mirror: tuple[bytearray, array[int]] | None = (
            (bytearray(), array("Q")) if self._count == 0 else None
        )
        self.write_error: OSError | None = None  # set by a failed write; the log is then frozen

    def _recover(self) -> tuple[int, int]:
        """Return (lines, bytes) of the complete part of existing files, truncating the rest."""
        if not self._index_path.exists() and not self._data_path.exists():
            return 0, 0
        data_size = self._data_path.stat().st_size if self._data_path.exists() else 0
        index_size = self._index_path.stat().st_size if self._index_path.exists() else 0
        count, size = index_size // _ENTRY, 0
        if count and data_size:
            with self._index_path.open("rb") as index, self._data_path.open("rb") as data:
                while count:
                    offset = _entries(_read_at(index, (count - 1) * _ENTRY, _ENTRY))[0]
                    end = self._line_end(data, offset & _OFFSET_MASK, data_size)
                    if end is not None:
                        size = end
                        break
                    count -= 1
        else:
            count = 0
        for path, length, want in (
            (self._data_path, data_size, size),
            (self._index_path, index_size, count * _ENTRY),
        ):
            if length != want:
                os.truncate(path, want)
        return count, size

    @staticmethod
    def _line_end(data: BinaryIO, offset: int, data_size: int) -> int | None:
        """Return the end of the line starting at `offset`, or None if it is not complete."""
        position = offset
        while position < data_size:
            block = _read_at(data, position, _SCAN_BLOCK)
            newline = block.find(b"\n")
            if newline >= 0:
                return position + newline + 1
            position += len(block)
        return None

    @property
    def count(self) -> int:
        """Return the number of committed lines."""
        return self._count

    @property
    def total(self) -> int:
        """Return the committed lines plus one if there is a non-empty pending line."""
        return self._count + (1 if self._pending_text() else 0)

    @property
    def byte_size(self) -> int:
        """Return the committed size of the data file in bytes."""
        return self._size

    def append(self, lines: Sequence[str], tag: int = 0, first_tag: int | None = None) -> None:
        """Commit `lines` (none may contain "\\n") with `tag`, the first with `first_tag`."""
        if not lines:
            return
        for value in (tag, first_tag):
            if value is not None and not 0 <= value <= 0xFF:
                raise ValueError(f"A line tag must be a byte (0-255), not {value}.")
        payload = "\n".join(lines) + "\n"
        if payload.count("\n") != len(lines):
            raise ValueError("A log line must not contain a newline character.")
        if self.write_error is not None:
            raise OSError(self.write_error.errno, self.write_error.strerror, str(self._data_path))
        encoded = payload.encode("utf-8", errors="replace")
        # For ASCII text a line's byte length is its length: no need to split the bytes again.
        lengths = map(len, lines if len(encoded) == len(payload) else encoded.split(b"\n"))
        starts = map(operator.add, accumulate(lengths, initial=self._size), range(len(lines)))
        entries = array("Q", map(operator.or_, starts, repeat(tag << _OFFSET_BITS)))
        if first_tag is not None:
            entries[0] = (entries[0] & _OFFSET_MASK) | (first_tag << _OFFSET_BITS)
        try:
            if self._data_writer is None:
                self._open_writers()
            assert self._data_writer is not None
            self._data_writer.write(encoded)
        except OSError as e:
            self._roll_back(e)
            raise
        self._unwritten.extend(entries)
        self._count += len(lines)
        self._size += len(encoded)
        if self._mirror is not None:
            if self._size > _MIRROR_BYTES:
                self._mirror = None
            else:
                self._mirror[0].extend(encoded)
                self._mirror[1].extend(entries)
        self._dirty = True
        if len(self._unwritten) >= _INDEX_FLUSH_ENTRIES:
            self.flush()

    def set_pending(self, text: str | Callable[[], str] | None, tag: int = 0) -> None:
        """Set the unfinished last line (a string, or a callable rendering it when read)."""
        self._pending = text
        self._pending_tag = tag

    def read(self, lo: int, hi: int) -> list[Line]:
        """Return lines [lo, hi) of `total`, clipped; the pending line comes last, partial."""
        # What a reader is shown is on disk first (a crash of the gateway keeps it); a flush
        # that fails rolls the log back, so the counts below are taken after it.
        self._sync()
        pending = self._pending_text()
        total = self._count + (1 if pending else 0)
        lo, hi = max(lo, 0), min(hi, total)
        if lo >= hi:
            return []
        lines: list[Line] = []
        committed_hi = min(hi, self._count)
        if lo < committed_hi:
            entries, texts = self._committed(lo, committed_hi)
            numbers = range(lo + 1, committed_hi + 1)
            tags = [entry >> _OFFSET_BITS for entry in entries[: len(numbers)]]
            lines = [
                Line(number, text, tag)
                for number, text, tag in zip(numbers, texts, tags, strict=True)
            ]
        if hi > self._count:
            lines.append(Line(self._count + 1, pending, self._pending_tag, partial=True))
        return lines

    def tail(self, n: int) -> list[Line]:
        """Return the last `n` lines, the pending one included."""
        total = self.total
        return self.read(total - n, total) if n > 0 else []

    def flush(self) -> None:
        """Write buffered data, then the index entries that describe it.

        A failed write (a full disk, say) raises OSError after dropping what was not yet
        written, so the files and the counts still agree.
        """
        if not self._dirty:
            return
        assert self._data_writer is not None and self._index_writer is not None
        try:
            self._data_writer.flush()
            self._index_writer.write(_packed(self._unwritten))
            self._index_writer.flush()
        except OSError as e:
            self._roll_back(e)
            raise
        del self._unwritten[:]
        self._dirty = False
        self._durable = (self._count, self._size)

    def _roll_back(self, error: OSError) -> None:
        """Freeze the log at its last complete flush, on disk (if it can) and in memory."""
        self.write_error = error
        for handle in (self._data_writer, self._index_writer):
            if handle is not None:
                with contextlib.suppress(OSError, ValueError):
                    handle.close()
        self._data_writer = self._index_writer = None
        self._count, self._size = self._durable
        self._mirror = None
        for path, length in (
            (self._data_path, self._size),
            (self._index_path, self._count * _ENTRY),
        ):
            with contextlib.suppress(OSError):
                if path.stat().st_size > length:  # never extend a file with zeros
                    os.truncate(path, length)
        del self._unwritten[:]
        self._dirty = False

    def _committed(self, lo: int, hi: int) -> tuple[array[int], list[str]]:
        """Return the index entries and the texts of committed lines [lo, hi) (with one entry
        more when a line follows), from the mirror if there is one, else from the files."""
        want = hi - lo + (1 if hi < self._count else 0)
        mirror = self._mirror
        if mirror is None:
            index, data = self._readers()
            entries = _entries(_read_at(index, lo * _ENTRY, want * _ENTRY))
        else:
            entries = mirror[1][lo : lo + want]
        start = entries[0] & _OFFSET_MASK
        end = entries[-1] & _OFFSET_MASK if hi < self._count else self._size
        if mirror is None:
            return entries, _decode(_read_at(data, start, end - start))
        return entries, _decode(bytes(mirror[0][start:end]))

    def close(self) -> None:
        """Flush and close every file handle; later reads and appends reopen what they need."""
        try:
            self.flush()
        finally:
            for handle in (
                self._data_writer,
                self._index_writer,
                self._data_reader,
                self._index_reader,
            ):
                if handle is not None:
                    handle.close()
            self._data_writer = self._index_writer = None
            self._data_reader = self._index_reader = None

    def iter_committed(
        self, start: int = 0, block_bytes: int = 4 << 20
    ) -> Iterator[tuple[int, list[str]]]:
        """Yield (index of the first line, lines) blocks of committed lines from `start` on."""
        count, size = self._count, self._size
        if start >= count:
            return
        self._sync()
        index, data = self._readers()
        position = _entries(_read_at(index, max(start, 0) * _ENTRY, _ENTRY))[0] & _OFFSET_MASK
        first = max(start, 0)
        carry = b""
        while position < size:
            want = min(max(block_bytes, len(carry)), size - position)  # doubles for a long line
            block = carry + _read_at(data, position, want)
            position += len(block) - len(carry)
            cut = block.rfind(b"\n") + 1
            carry = block[cut:]
            if cut:
                lines = _decode(block[:cut])
                yield first, lines
                first += len(lines)

    def _pending_text(self) -> str:
        """Return the pending line's current text ("" if none)."""
        pending = self._pending
        if pending is None:
            return ""
        return pending if isinstance(pending, str) else pending()

    def _sync(self) -> None:
        """Make everything appended so far visible to the read handles, as far as it can."""
        if self._dirty:
            with contextlib.suppress(OSError):  # the writer learns of it on its next append
                self.flush()

    def _open_writers(self) -> None:
        """Open (creating if needed) both files for appending."""
        self._data_path.parent.mkdir(parents=True, exist_ok=True)
        self._data_writer = self._data_path.open("ab", buffering=_DATA_BUFFER)
        # Buffered, so that a short write (a disk filling up) is retried or raises; each flush
        # of the log writes its index entries out at once.
        self._index_writer = self._index_path.open("ab")

    def _readers(self) -> tuple[BinaryIO, BinaryIO]:
        """Return the (index, data) read handles, opening them on first use."""
        if self._index_reader is None or self._data_reader is None:
            self._index_reader = self._index_path.open("rb")
            self._data_reader = self._data_path.open("rb")
        return self._index_reader, self._data_reader


def clip_line(text: str, max_chars: int | None) -> tuple[str, int]:
    """Return `text` cut to `max_chars` (None: no limit) and how many characters were cut."""
    if max_chars is None or len(text) <= max_chars:
        return text, 0
    if max_chars < 0:
        raise ValueError(f"max_chars must be at least 0, not {max_chars}.")
    return text[:max_chars], len(text) - max_chars
