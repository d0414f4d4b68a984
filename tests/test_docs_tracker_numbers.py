"""README.md and docs/*.md say what a piece of work is, never the project tracker's number for it
("issue 16", "issues 27–31", "#42"): a reader has no tracker, and a number says nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# "issue 16", "Issues 27–31", "issue #42", "PR 7", or a bare "#42" (not a heading's `#`, not an
# anchor like `#use-from-an-mcp-host`, not a colour like `#1e1e1e`).
TRACKER_NUMBER = re.compile(
    r"\b(?:issues?|PRs?|pull requests?)\s+#?\d+|(?<![\w#&/])#\d+\b(?![\w-])", re.IGNORECASE
)


def tracker_numbers(text: str) -> list[str]:
    """Return the tracker numbers `text` names."""
    return [found.group(0) for found in TRACKER_NUMBER.finditer(text)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.relative_to(ROOT).as_posix())
def test_no_tracker_numbers(doc: Path) -> None:
    found = tracker_numbers(doc.read_text())
    assert not found, f"{doc.relative_to(ROOT)} names tracker numbers: {found}"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Issue 16's target for this row", ["Issue 16"]),
        ("after issues 27–31 had landed", ["issues 27"]),
        ("fixed in issue #42 and PR 7", ["issue #42", "PR 7"]),
        ("see #42 for the rest", ["#42"]),
        ("the restructuring of the transport seam", []),
        ("[Use it](#use-from-an-mcp-host), a colour `#1e1e1e`, &#39;", []),
        ("## 2. Conventions\n### 7 kernels", []),
        ("an issue the person files; 16 issues were closed", []),
    ],
)
def test_what_a_tracker_number_is(text: str, found: list[str]) -> None:
    assert tracker_numbers(text) == found
