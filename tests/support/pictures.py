"""The pictures in docs/: where a test keeps the screenshot it takes, and whether one is blank."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from tests.support.png import Picture

DOCS = Path(__file__).resolve().parents[2] / "docs"
# Set to 1, the browser tests write their pictures into docs/; otherwise into their tmp_path.
WRITE = "LOOMGATE_WRITE_PICTURES"
# A page that shows something: its text is anti-aliased into many colours, and more than a
# line or a frame of its pixels differ from its background (a blank page has 1 or 2 colours).
MIN_COLOURS = 64
MIN_DRAWN = 0.01


def keep(name: str, data: bytes, scratch: Path) -> Path:
    """Write picture `name` (PNG `data`) into docs/ if LOOMGATE_WRITE_PICTURES=1 asks, else
    into `scratch`, so that a normal run leaves the checkout alone; return where it went."""
    path = (DOCS if os.environ.get(WRITE) == "1" else scratch) / name
    path.write_bytes(data)
    return path


def blank(picture: Picture) -> str | None:
    """Return why `picture` shows nothing (too few colours, almost all background), or None."""
    total = picture.width * picture.height
    if total == 0:
        return "no pixels"
    counts: Counter[bytes] = Counter()
    step = picture.channels
    for row in picture.rows:
        counts.update(row[i : i + 3] for i in range(0, len(row), step))
    drawn = 1 - counts.most_common(1)[0][1] / total
    if len(counts) < MIN_COLOURS:
        return f"{len(counts)} colours (a page with text has at least {MIN_COLOURS})"
    if drawn < MIN_DRAWN:
        return f"{drawn:.2%} of its pixels differ from its background (at least {MIN_DRAWN:.0%})"
    return None
