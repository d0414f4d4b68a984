"""Which executions a notebook export holds: a span of execution numbers (`a:b`, the last N as
`-N:`) and who ran them (the record's `source` and `client`)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field

from loomgate.gateway.records.line_range import LineRange, LineRangeError
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.shared.echo import echo
from loomgate.shared.wire import Source

SOURCES: tuple[Source, ...] = ("loomgate", "other")
FORM = (
    "A:B, execution numbers, inclusive, either end optional, a negative end counting back from "
    "the last ('-10:' is the last ten, '5:8' is In [5] to In [8])"
)


class SelectionError(ValueError):
    """A selection that cannot be parsed; the message says what is wrong and what to write."""


@dataclass(frozen=True)
class Selection:
    """Executions numbered within `span` (negative ends count the chosen ones from the last),
    run by `source` and by a client whose label is `client` or begins with it and a space."""

    span: LineRange = field(default_factory=lambda: LineRange(None, None))
    source: Source | None = None
    client: str | None = None

    @classmethod
    def parse(
        cls, executions: str | None, source: str | None = None, client: str | None = None
    ) -> Selection:
        """Return the selection the arguments write (None or "" for each: no limit)."""
        try:
            span = LineRange.parse(executions or None)
        except LineRangeError:
            raise SelectionError(
                f"executions {echo(executions)} is not a selection; expected {FORM}"
            ) from None
        chosen: Source | None = None
        if source:
            chosen = next((s for s in SOURCES if s == source), None)
            if chosen is None:
                raise SelectionError(
                    f"source must be loomgate (cells sent through loomgate) or other (cells "
                    f"another Jupyter client sent), not {echo(source)}"
                )
        return cls(span=span, source=chosen, client=client or None)

    def ran_by(self, record: ExecutionRecord) -> bool:
        """Return whether `record` was run by whom this selection keeps."""
        meta = record.meta
        if self.source is not None and meta["source"] != self.source:
            return False
        if self.client is None:
            return True
        label = meta.get("client") or ""
        return label == self.client or label.startswith(self.client + " ")

    def pick(self, records: Sequence[ExecutionRecord]) -> list[ExecutionRecord]:
        """Return the records (oldest first, as given) this selection keeps."""
        kept = [record for record in records if self.ran_by(record)]
        numbers = [record.number for record in kept]
        start, stop = self.span.start, self.span.stop
        if start is None:
            lo = 0
        elif start > 0:
            lo = bisect_left(numbers, start)
        else:
            lo = max(len(kept) + start, 0)
        if stop is None:
            hi = len(kept)
        elif stop > 0:
            hi = bisect_right(numbers, stop)
        else:
            hi = max(len(kept) + stop + 1, 0)
        return kept[lo:hi]

    def described(self) -> dict[str, str | None]:
        """Return the selection as the notebook's metadata notes it."""
        return {"executions": str(self.span), "source": self.source, "client": self.client}
