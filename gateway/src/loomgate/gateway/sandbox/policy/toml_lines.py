"""Where a key or table of a TOML file is written, so an error can name its line."""

from __future__ import annotations

import re

__all__ = ["TomlLines"]

HEADER = re.compile(r"^\s*\[")
_KEY = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*')"""
KEY_LINE = re.compile(rf"^\s*{_KEY}(?:\s*\.\s*{_KEY})*\s*=")


def quoted(name: str) -> str:
    """Return a pattern for `name` as TOML writes a key: bare, "quoted" or 'literal'."""
    plain = re.escape(name)
    escaped = re.escape(name.replace("\\", "\\\\").replace('"', '\\"'))
    return rf'(?:{plain}|"{escaped}"|\'{plain}\')'


class TomlLines:
    """The lines of one TOML text, searched for keys and tables (1-based line numbers).

    It reads the text as people write it: `[profiles.NAME]` tables with `key = value` lines,
    an inline `NAME = {…}` under `[profiles]`, or dotted keys; None when it cannot tell.
    """

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def find(self, pattern: str, start: int = 0, stop: int | None = None) -> int | None:
        """Return the 0-based index of the first line in [start, stop) matching `pattern`."""
        compiled = re.compile(pattern)
        end = len(self.lines) if stop is None else stop
        return next((i for i in range(start, end) if compiled.match(self.lines[i])), None)

    def table_end(self, start: int) -> int:
        """Return the index of the first header after line `start`, or the number of lines."""
        found = self.find(HEADER.pattern, start + 1)
        return len(self.lines) if found is None else found

    def top_level(self, key: str) -> int | None:
        """Return the line where top-level `key` is set, or opens a table."""
        first_header = self.find(HEADER.pattern)
        k = quoted(key)
        found = self.find(rf"^\s*{k}\s*[=.]", 0, first_header)
        if found is None:
            found = self.find(rf"^\s*\[\[?\s*{k}\s*[\].]")
        return None if found is None else found + 1

    def table_index(self, parent: str, name: str) -> int | None:
        """Return the index of the line that opens table `parent.name`."""
        p, n = quoted(parent), quoted(name)
        found = self.find(rf"^\s*\[\s*{p}\s*\.\s*{n}\s*[\].]")
        if found is not None:
            return found
        parent_header = self.find(rf"^\s*\[\s*{p}\s*\]")
        if parent_header is not None:
            found = self.find(rf"^\s*{n}\s*[=.]", parent_header + 1, self.table_end(parent_header))
            if found is not None:
                return found
        return self.find(rf"^\s*{p}\s*\.\s*{n}\s*[=.]", 0, self.find(HEADER.pattern))

    def table(self, parent: str, name: str) -> int | None:
        """Return the line that opens table `parent.name` (its header, inline table or first
        dotted key), else the line of `parent`."""
        found = self.table_index(parent, name)
        return self.top_level(parent) if found is None else found + 1

    def key_index(self, parent: str, name: str, key: str) -> int | None:
        """Return the index of the line setting `key` in table `parent.name`."""
        start = self.table_index(parent, name)
        if start is None:
            return None
        k = quoted(key)
        if HEADER.match(self.lines[start]):
            return self.find(rf"^\s*{k}\s*=", start + 1, self.table_end(start))
        # an inline table or dotted keys: the key on the same line, or a dotted line below
        if re.search(rf"[{{,]\s*{k}\s*=", self.lines[start]):
            return start
        found = self.find(
            rf"^\s*(?:{quoted(parent)}\s*\.\s*)?{quoted(name)}\s*\.\s*{k}\s*=",
            start,
            self.table_end(start),
        )
        return found

    def key(self, parent: str, name: str, key: str) -> int | None:
        """Return the line setting `key` in table `parent.name`, else the table's line."""
        found = self.key_index(parent, name, key)
        return self.table(parent, name) if found is None else found + 1

    def item(self, parent: str, name: str, key: str, value: str) -> int | None:
        """Return the line holding string `value` of the list `key` in table `parent.name`
        (lists may span lines), else the key's line."""
        start = self.key_index(parent, name, key)
        if start is None:
            return self.key(parent, name, key)
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        needles = (f'"{escaped}"', f"'{value}'")
        for i in range(start, self.table_end(start)):
            if i > start and KEY_LINE.match(self.lines[i]):
                break  # the next key: the list has ended
            if any(needle in self.lines[i] for needle in needles):
                return i + 1
        return start + 1
