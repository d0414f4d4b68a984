"""Where product code steps outside the type checker: few places, each saying why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# (package, escape, most allowed): the gateway's `type: ignore`s and the translator's casts.
CEILINGS = [("gateway", "type: ignore", 5), ("translator", "cast(", 5)]
IGNORE = re.compile(r"#\s*type:\s*ignore(\[[^\]]*\])?")


def escapes(package: str, escape: str) -> list[tuple[str, list[str], int]]:
    """Return each product line of `package` holding `escape`: (where, its file's lines, index)."""
    found = []
    for path in sorted((ROOT / package / "src").rglob("*.py")):
        lines = path.read_text().splitlines()
        for index, line in enumerate(lines):
            if escape in line:
                found.append((f"{path.relative_to(ROOT)}:{index + 1}", lines, index))
    return found


def says_why(lines: list[str], index: int) -> bool:
    """Return whether line `index` carries a comment of its own (besides a `type: ignore`), or
    follows a comment line."""
    own = IGNORE.sub("", lines[index])
    return "#" in own or (index > 0 and lines[index - 1].lstrip().startswith("#"))


@pytest.mark.parametrize(
    ("lines", "index", "expected"),
    [
        (["x = f()  # type: ignore[arg-type]"], 0, False),
        (["x = f()  # type: ignore[arg-type]  # typeshed omits None"], 0, True),
        (["# typeshed omits None", "x = f()  # type: ignore"], 1, True),
        (["y = 1", "x = cast(int, y)"], 1, False),
        (["x = cast(int, y)  # trusted"], 0, True),
    ],
)
def test_a_reason_is_a_comment_on_the_line_or_above(
    lines: list[str], index: int, expected: bool
) -> None:
    assert says_why(lines, index) is expected


@pytest.mark.parametrize(("package", "escape", "most"), CEILINGS)
def test_few_escapes_are_left(package: str, escape: str, most: int) -> None:
    found = [where for where, _, _ in escapes(package, escape)]
    assert len(found) <= most, f"{len(found)} `{escape}` in {package} (at most {most}): {found}"


@pytest.mark.parametrize(("package", "escape", "_"), CEILINGS)
def test_each_escape_says_why(package: str, escape: str, _: int) -> None:
    silent = [
        where for where, lines, index in escapes(package, escape) if not says_why(lines, index)
    ]
    assert not silent, f"say why (a comment on the line or above) at {silent}"
