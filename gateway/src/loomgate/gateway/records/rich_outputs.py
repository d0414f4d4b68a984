"""One execution's rich (non-text) outputs: each MIME bundle under rich/, indexed in rich.jsonl."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from loomgate.shared.wire import RichEntry

IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/svg+xml")
INDEX_FILE = "rich.jsonl"


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

    @staticmethod
    def read_index(directory: Path) -> list[RichEntry]:
        """Return the index entries stored in `directory` (none if there is no index)."""
        path = directory / INDEX_FILE
        if not path.exists():
            return []
        entries: list[RichEntry] = []
        for line in path.read_text("utf-8").splitlines():
            with contextlib.suppress(ValueError):  # a line cut short by a full disk
                entries.append(json.loads(line))
        return entries

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
        with (self.directory / INDEX_FILE).open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
        self.entries.append(entry)

    def bundle(self, index: int) -> MimeBundle:
        """Return the MIME bundle of rich output `index` (KeyError if there is none)."""
        if not 0 <= index < len(self.entries):
            raise KeyError(index)
        path = self.directory / "rich" / f"{index}.json"
        bundle: MimeBundle = json.loads(path.read_text("utf-8"))
        return bundle
