"""One execution's rich (non-text) outputs: each MIME bundle under rich/, indexed in rich.jsonl.

A bundle's file is written before its index line, and the index line after its text stand-in
is on disk in `combined` (the record flushes it first): a gateway killed in between leaves a
bundle no line names, never a line naming what is not there. An index line cut short (a full
disk) is skipped, and the next one starts on a line of its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict, cast

from loomgate.gateway.records.json_lines import JsonLines
from loomgate.shared.wire import RichEntry

IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml")
INDEX_FILE = "rich.jsonl"
INDEX_SEPARATORS = (", ", ": ")  # as the first gateways spelled the index


class MimeBundle(TypedDict):
    """A rich output as the kernel sent it."""

    data: dict[str, object]
    metadata: dict[str, object]


def image_mime(data: Mapping[str, object]) -> str | None:
    """Return the image MIME type a bundle carries, if any (which makes its line `rich`)."""
    return next((mime for mime in IMAGE_MIMES if mime in data), None)


class RichOutputs:
    """The rich outputs of one execution, in the order they arrived."""

    def __init__(self, directory: Path, entries: list[RichEntry]) -> None:
        self.directory = directory
        self.entries = entries
        self.index = JsonLines(directory / INDEX_FILE, separators=INDEX_SEPARATORS)

    @staticmethod
    def read_index(directory: Path) -> list[RichEntry]:
        """Return the index entries stored in `directory` (none if there is no index)."""
        return cast(list[RichEntry], JsonLines(directory / INDEX_FILE).read())

    def save(
        self, data: Mapping[str, object], metadata: Mapping[str, object], line: int, *, result: bool
    ) -> None:
        """Store a bundle whose text stand-in starts at `combined` line `line`."""
        index = len(self.entries)
        rich_dir = self.directory / "rich"
        rich_dir.mkdir(exist_ok=True)
        bundle = {"data": dict(data), "metadata": dict(metadata)}
        (rich_dir / f"{index}.json").write_text(json.dumps(bundle), encoding="utf-8")
        entry = RichEntry(
            index=index,
            line=line,
            mimetypes=sorted(data),
            bytes=sum(len(str(v)) for v in data.values()),
            result=result,
        )
        self.index.append(entry)
        self.entries.append(entry)

    def bundle(self, index: int) -> MimeBundle:
        """Return the MIME bundle of rich output `index` (KeyError if there is none)."""
        if not 0 <= index < len(self.entries):
            raise KeyError(index)
        path = self.directory / "rich" / f"{index}.json"
        bundle: MimeBundle = json.loads(path.read_text("utf-8"))
        return bundle
