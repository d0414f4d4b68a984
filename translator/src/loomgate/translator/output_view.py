"""Which of a cell's lines to show: the output limits, the head and tail kept, images in place.

presentation/ words what this module selects.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from loomgate.shared import wire


@dataclass(frozen=True)
class OutputLimits:
    """Beyond these, a cell's output keeps its head and tail and says what it left out."""

    max_lines: int = 200
    max_chars: int = 20_000

    @property
    def half_lines(self) -> int:
        """Return how many lines the head (and the tail) may keep."""
        return max(1, self.max_lines // 2)


@dataclass(frozen=True)
class Image:
    """A rich output shown in place as an image: execution number and rich index."""

    execution: int
    index: int
    mime: str


Block = str | Image


@dataclass(frozen=True)
class CellOutput:
    """The combined lines of one execution to show: a head, a tail and how many in all."""

    head: Sequence[wire.Line]
    tail: Sequence[wire.Line]
    total: int

    @classmethod
    def from_gateway(cls, output: wire.OutputView | None) -> CellOutput:
        """Return the view carried in an execution's `output` field."""
        if not output:
            return cls((), (), 0)
        return cls(output["head"], output["tail"], output["total"])

    @property
    def omitted(self) -> int:
        """Return how many lines lie between the head and the tail."""
        return max(0, self.total - len(self.head) - len(self.tail))

    def limits_to_keep_all(self) -> OutputLimits:
        """Return limits under which every line of this view is shown (full_output=true, whose
        view the reply's budget has already cut)."""
        return OutputLimits(max_lines=max(2, 2 * self.total), max_chars=1 << 62)


def fit(
    head: Sequence[wire.Line], tail: Sequence[wire.Line], limits: OutputLimits
) -> tuple[list[wire.Line], list[wire.Line]]:
    """Return head and tail cut to the line and character limits (head first, then tail)."""
    head_lines = list(head[: limits.half_lines])
    tail_lines = list(tail[-limits.half_lines :]) if tail else []
    budget = limits.max_chars // 2

    def within(lines: list[wire.Line], from_end: bool) -> list[wire.Line]:
        kept: list[wire.Line] = []
        used = 0
        for line in reversed(lines) if from_end else lines:
            used += len(line["text"]) + 1
            if used > budget and kept:
                break
            kept.append(line)
        return kept[::-1] if from_end else kept

    if sum(len(x["text"]) + 1 for x in head_lines + tail_lines) > limits.max_chars:
        head_lines, tail_lines = within(head_lines, False), within(tail_lines, True)
    return head_lines, tail_lines


def chars_of(lines: Sequence[wire.Line]) -> int:
    """Return the characters `lines` take in a cell's text (each with its newline)."""
    return sum(len(line["text"]) + 1 for line in lines)


def lines_within(lines: Sequence[wire.Line], budget: int, least: int = 0) -> list[wire.Line]:
    """Return the first of `lines` whose text fits in `budget` characters (at least `least` of
    them: a reply shows one line even when it alone is over)."""
    kept: list[wire.Line] = []
    used = 0
    for line in lines:
        used += len(line["text"]) + 1
        if used > budget and len(kept) >= least:
            break
        kept.append(line)
    return kept


def leading(lines: Sequence[wire.Line], budget: int) -> list[wire.Line]:
    """Return the first of `lines` that fit in `budget` characters as a read shows them,
    numbered (at least one line: the gateway has clipped each to the budget)."""
    kept: list[wire.Line] = []
    numbering = len(str(lines[-1]["n"])) + 2 if lines else 0  # "  42│" and the newline
    used = 0
    for line in lines:
        used += len(line["text"]) + numbering
        if used > budget and kept:
            break
        kept.append(line)
    return kept


@dataclass
class SearchPage:
    """The search results a reply shows within its character budget."""

    groups: list[wire.SearchGroup] = field(default_factory=list)
    clipped: dict[tuple[int, int], int] = field(default_factory=dict)  # (execution, n) → chars
    left_out: int = 0  # matching lines not shown
    next_match: tuple[int, int] | None = None  # (execution, n) of the first one not shown

    @classmethod
    def within(cls, groups: Sequence[wire.SearchGroup], budget: int) -> SearchPage:
        """Return the groups' lines that fit in `budget` characters, cut at a line (at least
        one line; a line longer than the budget is clipped to it)."""
        page = cls()
        used = 0
        for group in groups:
            kept: list[wire.SearchLine] = []
            for line in group["lines"]:
                cost = len(line["text"]) + len(str(line["n"])) + 4  # "M 42│" and the newline
                if page.next_match is not None or (used + cost > budget and used):
                    if line["marker"] == "M":
                        page.left_out += 1
                        page.next_match = page.next_match or (group["execution"], line["n"])
                    continue
                text = line["text"][:budget]
                if len(text) < len(line["text"]):
                    page.clipped[(group["execution"], line["n"])] = len(line["text"]) - len(text)
                used += cost - len(line["text"]) + len(text)
                kept.append(wire.SearchLine(n=line["n"], text=text, marker=line["marker"]))
            if kept:
                page.groups.append(wire.SearchGroup(execution=group["execution"], lines=kept))
        return page
