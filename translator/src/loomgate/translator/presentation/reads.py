"""Reads and searches of a cell's output as they read, and the call that reads on."""

from __future__ import annotations

from collections.abc import Sequence

from loomgate.shared import wire
from loomgate.shared.echo import echo
from loomgate.shared.wire import RUNNING_STATES
from loomgate.translator.output_view import (
    SearchPage,
)
from loomgate.translator.presentation.audience import Audience, read_call
from loomgate.translator.presentation.cells import clipped_suffix


def render_read(
    response: wire.StreamRead,
    shown: Sequence[wire.Line] | None = None,
    audience: Audience = "model",
) -> str:
    """Return a stream read: a header saying which lines of how many, the numbered lines
    `shown` (default: all read), and the call that reads on when the range was not all shown."""
    number, stream, total = response["number"], response["stream"], response["total"]
    lines = list(response["lines"] if shown is None else shown)
    if total == 0:
        return f"In [{number}] {stream} is empty."
    if not lines:
        return past_the_end(response, audience) or (
            f"In [{number}] {stream} has {total:,} lines so far (still running); "
            f"lines {response['range']} are not written yet."
        )
    first, last = lines[0]["n"], lines[-1]["n"]
    running = " (still running)" if response["state"] in RUNNING_STATES else ""
    header = f"In [{number}] {stream}, lines {first:,}–{last:,} of {total:,}{running}:"
    width = len(str(last))
    body = [f"{line['n']:>{width}}│{line['text']}{clipped_suffix(line)}" for line in lines]
    remaining = read_on(response, lines)
    if remaining is not None:
        body.append(
            f"… the range goes on; {read_call(number, stream, remaining, audience)} reads on"
        )
    return "\n".join([header, *body])


def past_the_end(response: wire.StreamRead, audience: Audience = "model") -> str | None:
    """Return the refusal of a read whose range lies wholly past the end of a finished
    execution's stream (None when it found lines, the stream is empty, or the cell runs on and
    may still write them)."""
    number, stream, total = response["number"], response["stream"], response["total"]
    if response["lines"] or total == 0 or response["state"] in RUNNING_STATES:
        return None
    last = min(total, 20)
    tail = read_call(number, stream, f"-{last}:", audience)
    has = "1 line" if total == 1 else f"{total:,} lines"
    reads = "line" if last == 1 else f"{last} lines"
    return (
        f"In [{number}] {stream} has {has}; lines {response['range']} are past its end. "
        f"{tail} reads its last {reads}."
    )


def read_on(response: wire.StreamRead, shown: Sequence[wire.Line]) -> str | None:
    """Return the `lines` range that reads on from the last line shown, or None if the range
    asked for was all shown."""
    last = shown[-1]["n"] if shown else response["first"] - 1
    if last >= response["last"] and not response["truncated"]:
        return None
    stop = response["range"].partition(":")[2]  # the range asked for: "start:stop"
    return f"{last + 1}:{stop}"


def search_scope(number: int | None) -> str:
    """Return what a search looked in: one execution, or (None) all of them."""
    return "all executions" if number is None else f"In [{number}]"


def render_search(
    response: wire.SearchReply,
    scope: str,
    page: SearchPage | None = None,
    audience: Audience = "model",
) -> str:
    """Return search results: M (match) and C (context) lines grouped, `--` between groups;
    `page` (default: every line) is what fits in the reply."""
    query, mode, stream = response["query"], response["mode"], response["stream"]
    matches = response["matches"]
    page = page or SearchPage(groups=list(response["groups"]))
    if not page.groups:
        return f"No lines match {echo(query)} ({mode}) in {scope} {stream}."
    plural = "match" if matches == 1 else "matches"
    out = [f"{matches} {plural} for {echo(query)} ({mode}) in {scope} {stream}:"]
    previous: int | None = None
    for group in page.groups:
        if previous is not None:
            out.append("--")
        number = group["execution"]
        if number != previous:
            out.append(f"In [{number}]:")
        previous = number
        width = len(str(group["lines"][-1]["n"]))
        for line in group["lines"]:
            clipped = page.clipped.get((number, line["n"]), 0)
            suffix = f" …[+{clipped:,} chars]" if clipped else ""
            out.append(f"{line['marker']} {line['n']:>{width}}│{line['text']}{suffix}")
    if page.next_match is not None:
        number, n = page.next_match
        plural = "match" if page.left_out == 1 else "matches"
        call = read_call(number, stream, f"{n}:{n}", audience)
        out.append(
            f"… {page.left_out:,} more {plural} not shown (the reply is full); the next is "
            f"In [{number}] line {n:,}: {call}"
        )
    if response["truncated"]:
        out.append(f"(more matches exist; only the first {matches} are shown)")
    return "\n".join(out)
