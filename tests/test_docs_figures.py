"""A measured figure is stated once, as its bench wrote it: docs/measured.md quotes bench/results,
and README.md quotes docs/measured.md.

docs/measured.md's convention (its first paragraph says it too): every number in its text comes
after a backquoted source in the same section (a heading starts a new one), a results file the
benches write (`bench/results/NAME.md`, or `docs/reliability.md`, which `bench.stress` writes),
and is found, as written, among that file's numbers (`1,000` and `1000` are one number; a sign is
not part of it). The last source named before a number is its source. A bound after `≤` or `≥`
is a goal, not a figure; headings, code blocks and backquoted spans (commands, arguments, code)
are not checked.

README.md states a measured figure (a ratio `1.02×`, a time in ms or µs, a time in seconds with
decimals, a size in MB or GB) only as docs/measured.md states it; its code blocks and backquoted
spans are examples, not figures.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MEASURED = ROOT / "docs" / "measured.md"
README = ROOT / "README.md"
SOURCE = re.compile(r"`(bench/results/[\w.-]+\.md|docs/reliability\.md)`")
FENCED = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
BACKQUOTED = re.compile(r"`[^`\n]*`")
LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
HEADING = re.compile(r"^#.*$", re.MULTILINE)
GOAL = re.compile(r"[≤≥]\s?[+−-]?$")
# A date, a version, a number with thousands commas, or a plain number; not inside a word (p90).
NUMBER = re.compile(
    r"(?<![\w.,])(\d{4}-\d\d-\d\d|\d+(?:\.\d+){2,}|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?!\w)"
)
# A figure the README could state: a ratio, ms or µs, seconds with decimals, MB or GB (ranges too).
RANGE = r"\d+(?:\.\d+)?(?:\s?[–-]\s?\d+(?:\.\d+)?)?"
FIGURE = re.compile(
    rf"(?<![\w.,]){RANGE}\s?(?:×|ms\b|µs\b|MB\b|MiB\b|GB\b|GiB\b)"
    r"|(?<![\w.,])\d+\.\d+(?:\s?[–-]\s?\d+\.\d+)?\s?s\b"
)


def masked(text: str) -> str:
    """Return `text` with its code blocks, backquoted spans and link targets blanked, each
    character kept in place (so that positions still match `text`)."""
    for pattern in (FENCED, BACKQUOTED, LINK_TARGET):
        text = pattern.sub(lambda found: re.sub(r"[^\n]", " ", found.group(0)), text)
    return text


def numbers(text: str) -> set[str]:
    """Return the numbers in `text`, thousands commas left out."""
    return {found.replace(",", "") for found in NUMBER.findall(text)}


def sections(text: str) -> list[str]:
    """Return `text` cut at its headings, each heading's line blanked."""
    blanked = HEADING.sub(lambda found: " " * len(found.group(0)), text)
    starts = [0, *(found.start() for found in HEADING.finditer(text)), len(text)]
    return [blanked[a:b] for a, b in itertools.pairwise(starts) if b > a]


def misquoted(doc: str, read: Callable[[str], str]) -> list[str]:
    """Return each number of `doc` that has no source before it in its section, or that its
    source (read by `read`, given its path) does not hold, with the reason."""
    wrong = []
    held: dict[str, set[str] | None] = {}
    for section in sections(doc):
        sources = [(found.start(), found.group(1)) for found in SOURCE.finditer(section)]
        text = masked(section)
        for found in NUMBER.finditer(text):
            if GOAL.search(text[max(0, found.start() - 3) : found.start()]):
                continue
            named = [path for at, path in sources if at < found.start()]
            if not named:
                wrong.append(f"{found.group(1)}: no source before it")
                continue
            if named[-1] not in held:
                try:
                    held[named[-1]] = numbers(read(named[-1]))
                except OSError:
                    held[named[-1]] = None
            source = held[named[-1]]
            if source is None:
                wrong.append(f"{found.group(1)}: {named[-1]} does not exist")
            elif found.group(1).replace(",", "") not in source:
                wrong.append(f"{found.group(1)}: not in {named[-1]}")
    return wrong


def figures(text: str) -> list[str]:
    """Return the measured figures `text` states outside its code, spaces made single."""
    return [" ".join(found.group(0).split()) for found in FIGURE.finditer(masked(text))]


def read_source(path: str) -> str:
    """Return the text of a results file, by its path from the repository's root."""
    return (ROOT / path).read_text()


def test_measured_quotes_its_sources() -> None:
    wrong = misquoted(MEASURED.read_text(), read_source)
    assert not wrong, f"docs/measured.md states numbers its sources do not: {wrong}"


def test_the_readme_states_figures_as_measured_does() -> None:
    measured = " ".join(masked(MEASURED.read_text()).split())
    differ = [figure for figure in figures(README.read_text()) if figure not in measured]
    assert not differ, f"README.md states figures docs/measured.md does not: {differ}"


SOURCES = {
    "bench/results/a.md": "| raw | 5.76 ms | 1.00× |\n| 1,000,000 lines | 5870 ms | 1.02× |",
    "bench/results/b.md": "2026-12-02, Python 3.11.7: +42 ms (-44 to +90)",
}


@pytest.mark.parametrize(
    ("doc", "wrong"),
    [
        ("From `bench/results/a.md`: raw 5.76 ms, 1.00×.", []),
        ("From `bench/results/a.md`: raw 5.8 ms.", ["5.8: not in bench/results/a.md"]),
        ("Raw 5.76 ms (`bench/results/a.md`).", ["5.76: no source before it"]),
        ("`bench/results/a.md`: 1000000 lines in 5870 ms, 1.02×", []),
        ("`bench/results/a.md`\n\n## Next\n\n5.76 ms", ["5.76: no source before it"]),
        (
            "`bench/results/a.md` 5.76, `bench/results/b.md` 5.76",
            ["5.76: not in bench/results/b.md"],
        ),
        ("`bench/results/b.md`, 2026-12-02 on 3.11.7: −42 ms (−44 to +90)", []),
        ("`bench/results/b.md`, 2026-12-03", ["2026-12-03: not in bench/results/b.md"]),
        ("`bench/results/b.md`, Python 3.11", ["3.11: not in bench/results/b.md"]),
        ("## 9 kernels\n\n`uv run python -m bench.x --rounds 7` (no figures)", []),
        ("```\n$ loomgate run 1+1\n[completed after 2 ms]\n```", []),
        ("a p90 and v1, no numbers", []),
        ("`bench/results/a.md`: 1.02× (goal ≤ 1.05×; ≥ +2 ms)", []),
        ("`bench/results/c.md`: 7 ms", ["7: bench/results/c.md does not exist"]),
    ],
)
def test_what_measured_may_state(doc: str, wrong: list[str]) -> None:
    def read(path: str) -> str:
        if path not in SOURCES:
            raise FileNotFoundError(path)
        return SOURCES[path]

    assert misquoted(doc, read) == wrong


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("taken back in 0.51 s, 1.23× the raw loop", ["0.51 s", "1.23×"]),
        (
            "1.23–1.35× in a loop, 4.36 ms, 13 µs, 370.4 MB",
            ["1.23–1.35×", "4.36 ms", "13 µs", "370.4 MB"],
        ),
        ("waits up to 10 s; 600 s of grace; 8,000 characters; 3 workers", []),
        ("`--timeout 1.5 s` and\n```\n[completed after 2 ms]\n```", []),
        ("the v1.2 protocol", []),
    ],
)
def test_what_a_readme_figure_is(text: str, found: list[str]) -> None:
    assert figures(text) == found
