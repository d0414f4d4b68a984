"""Files of JSON lines that only grow by whole lines: a line that a SIGKILL or a full disk cut
short is skipped when read, and never swallows the line written after it."""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Mapping
from pathlib import Path


class JsonLines:
    """One append-only file of JSON objects, one a line (mode 0600)."""

    def __init__(self, path: Path, separators: tuple[str, str] = (",", ":")) -> None:
        self.path = path
        self.separators = separators  # the file's spelling: the journal's is compact
        # Whether the file is known to end with a whole line; checked before the first append,
        # and again after an append the disk refused (it may have taken part of the line).
        self._ends_whole = False

    def append(self, entry: Mapping[str, object]) -> None:
        """Add `entry` as one line, in one write (OSError if the disk refuses it, or takes
        only part of it). The file is not kept open."""
        line = json.dumps(entry, separators=self.separators).encode() + b"\n"
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if not self._ends_whole:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # the torn line ends here, unreadable; this one is not
            self._ends_whole = False
            if os.write(fd, line) != len(line):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path))
            self._ends_whole = True
        finally:
            os.close(fd)

    def read(self) -> list[dict[str, object]]:
        """Return every whole line that holds a JSON object, oldest first."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        entries = []
        for line in data.splitlines():
            with contextlib.suppress(ValueError):  # cut short, or not ours
                entry = json.loads(line)
                if isinstance(entry, dict):
                    entries.append(entry)
        return entries
