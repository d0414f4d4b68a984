"""`start:stop` line ranges: 1-based, inclusive, negative counting from the end."""

from __future__ import annotations

import re
from dataclasses import dataclass

from loomgate.shared.echo import echo

_NUMBER = re.compile(r"[+-]?[0-9]+")
_FORM = "START:STOP, 1-based, either end optional, negative counting from the end"


class LineRangeError(ValueError):
    """A line range that cannot be parsed or that names no valid span."""


def _check(text: str, start: int | None, stop: int | None) -> None:
    """Raise LineRangeError, naming `text`, if the endpoints do not form a range."""
    if start == 0 or stop == 0:
        problem = "line numbers start at 1"
    elif start is not None and stop is not None and (start < 0) == (stop < 0) and start > stop:
        problem = f"start {start} comes after stop {stop}"
    else:
        return
    raise LineRangeError(f"Invalid line range {echo(text)}: {problem}; expected {_FORM}.")


def _index(number: int, total: int) -> int:
    """Return the 0-based index of line `number` (negative: from the end) among `total`."""
    return number - 1 if number > 0 else total + number


@dataclass(frozen=True)
class LineRange:
    """An inclusive span of lines; None ends are open, negative ends count back from the last."""

    start: int | None
    stop: int | None

    def __post_init__(self) -> None:
        _check(str(self), self.start, self.stop)

    @classmethod
    def parse(cls, text: str | None) -> LineRange:
        """Return the range written as "start:stop" or "n"; None, "" and ":" mean every line."""
        if text is None:
            return cls(None, None)
        parts = text.split(":")
        if len(parts) == 1:
            parts = [text, text]
        if len(parts) != 2 or any(p.strip() and not _NUMBER.fullmatch(p.strip()) for p in parts):
            raise LineRangeError(
                f"Invalid line range {echo(text)}: expected {_FORM} (e.g. '10:20' or '-20:')."
            )
        start, stop = (int(p) if p.strip() else None for p in parts)
        _check(text, start, stop)
        return cls(start, stop)

    def resolve(self, total: int) -> tuple[int, int]:
        """Return the 0-based half-open [lo, hi) this range covers in `total` lines, clipped."""
        lo = 0 if self.start is None else _index(self.start, total)
        hi = total if self.stop is None else _index(self.stop, total) + 1
        lo = min(max(lo, 0), total)
        return lo, min(max(hi, lo), total)

    def __str__(self) -> str:
        """Return the canonical "start:stop" spelling, open ends left empty."""
        start = "" if self.start is None else str(self.start)
        stop = "" if self.stop is None else str(self.stop)
        return f"{start}:{stop}"
