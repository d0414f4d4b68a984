"""The execution view's first page, cut from the execution a viewed tool's result was made of,
so the view paints on the result without asking for it (view_execution asks for the same)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loomgate.shared import wire

HEAD, TAIL = 20, 40  # the lines of a page shown inline: view_execution's defaults
PAGE_CHARS = 5000  # each line of a page, clipped to this
# An execution's fields the view never draws, left out of the page: every client of a viewed
# tool writes and reads the page.
UNDRAWN = frozenset({"finished", "gaps", "last_output", "silent_for", "streams"})


def first_page(
    execution: wire.Execution, head: int = HEAD, tail: int = TAIL, max_chars: int = PAGE_CHARS
) -> dict[str, Any] | None:
    """Return the fields of `execution` the view draws, with the `output` view_execution(head,
    tail, max_chars) would give, cut from the output it carries; None when that output cannot
    make it (none asked for, fewer lines than the page, or lines clipped shorter than
    `max_chars`)."""
    output = execution.get("output")
    if output is None:
        return None
    total = output["total"]
    if output["omitted"]:
        if len(output["head"]) < head or len(output["tail"]) < tail:
            return None
        first, last = output["head"][:head], output["tail"][len(output["tail"]) - tail :]
    else:
        lines = [*output["head"], *output["tail"]]
        if head + tail >= total:
            first, last = lines, []
        else:
            first, last = lines[:head], lines[total - tail :]
    shown = clipped(first, max_chars), clipped(last, max_chars)
    if shown[0] is None or shown[1] is None:
        return None
    page = wire.OutputView(
        total=total, head=shown[0], tail=shown[1], omitted=total - len(first) - len(last)
    )
    paged = drawn(execution)
    paged["output"] = page
    return paged


def drawn(execution: Mapping[str, Any]) -> dict[str, Any]:
    """Return the fields of `execution` the view draws (a copy)."""
    return {k: v for k, v in execution.items() if k not in UNDRAWN}


def clipped(lines: Sequence[wire.Line], max_chars: int) -> list[wire.Line] | None:
    """Return `lines` with each text cut to `max_chars` (the cut counted in `clipped`, as the
    gateway counts it), or None when one was already cut shorter."""
    out: list[wire.Line] = []
    for line in lines:
        text, cut = line["text"], line.get("clipped", 0)
        if cut and len(text) < max_chars:
            return None
        if len(text) > max_chars:
            line = line.copy()
            line["text"], line["clipped"] = text[:max_chars], cut + len(text) - max_chars
        out.append(line)
    return out
