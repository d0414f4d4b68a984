"""What a model (or a person) reads: records, reads, searches and kernels as concise text."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from loomgate.shared.echo import echo

Line = dict[str, Any]  # the gateway's line object: n, text, kind?, start?, partial?, clipped?
RUNNING_TAIL = 10


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

    head: Sequence[Line]
    tail: Sequence[Line]
    total: int

    @classmethod
    def from_gateway(cls, output: dict[str, Any] | None) -> CellOutput:
        """Return the view carried in an execution's `output` field."""
        if not output:
            return cls((), (), 0)
        return cls(output["head"], output["tail"], output["total"])


def format_elapsed(seconds: float) -> str:
    """Return a short duration: 12 ms, 1.2 s, 42 s, 3 min 5 s, 2 h 7 min."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))} ms"
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _state_note(execution: dict[str, Any]) -> str:
    state = execution["state"]
    note = execution.get("note")
    if state == "interrupted":
        return "interrupted"
    if state == "killed":
        return f"killed: {note}" if note else "killed"
    if state == "died":
        died = execution.get("died") or {}
        restarted = (
            "the kernel was restarted and its variables are gone"
            if died.get("restarted")
            else "the kernel is dead"
        )
        return f"died: {died.get('reason', 'the kernel process died')}; {restarted}"
    if state == "lost":
        return f"lost: {note}" if note else "lost"
    return ""


def unstored_note(execution: dict[str, Any]) -> str:
    """Return the note on output the gateway's disk refused ("" when all of it was stored)."""
    unstored = execution.get("unstored")
    if not unstored:
        return ""
    return (
        f"[output from line {unstored['from_line']:,} on was not stored: {unstored['reason']}; "
        "the gateway's state dir needs space or write permission]"
    )


def cell_header(execution: dict[str, Any]) -> str:
    """Return `In [N] (elapsed):`, with the end state when it is not a plain finish."""
    parts = [format_elapsed(execution["elapsed"])]
    note = _state_note(execution)
    if note:
        parts.append(note)
    return f"In [{execution['number']}] ({', '.join(parts)}):"


def _fit(head: Sequence[Line], tail: Sequence[Line], limits: OutputLimits) -> tuple[list, list]:
    """Return head and tail cut to the line and character limits (head first, then tail)."""
    head_lines = list(head[: limits.half_lines])
    tail_lines = list(tail[-limits.half_lines :]) if tail else []
    budget = limits.max_chars // 2

    def within(lines: list[Line], from_end: bool) -> list[Line]:
        kept: list[Line] = []
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


def render_cell(
    execution: dict[str, Any], output: CellOutput, limits: OutputLimits | None = None
) -> list[Block]:
    """Return a finished (or stopped) cell as IPython shows it: header, output, Out[N]."""
    limits = limits or OutputLimits()
    number = execution["number"]
    head, tail = _fit(output.head, output.tail, limits)
    blocks: list[Block] = []
    text: list[str] = [cell_header(execution)]
    shown = len(head) + len(tail)
    gap_after = head[-1]["n"] if head else 0
    for position, line in enumerate(head + tail):
        if tail and position == len(head) and shown < output.total:
            first = gap_after + 1
            last = tail[0]["n"] - 1
            text.append(omission_line(number, first, last, output.total))
        following = (head + tail)[position + 1] if position + 1 < shown else None
        piece = _render_line(execution, line, following)
        if isinstance(piece, Image):
            blocks.append("\n".join(text))
            blocks.append(piece)
            text = []
        elif piece is not None:
            text.append(piece)
    if not tail and shown < output.total:
        text.append(omission_line(number, gap_after + 1, output.total, output.total))
    if unstored_note(execution):
        text.append(unstored_note(execution))
    if text:
        blocks.append("\n".join(text))
    return [b for b in blocks if not (isinstance(b, str) and not b)]


def _render_line(execution: dict[str, Any], line: Line, following: Line | None) -> Block | None:
    kind = line.get("kind")
    number = execution["number"]
    text = line["text"] + clipped_suffix(line)
    if kind == "rich":
        if not line.get("start"):
            return None  # the text/plain stand-in of an image is not shown beside it
        rich = next((r for r in execution.get("rich", []) if r["line"] == line["n"]), None)
        image = _image_mime(rich)
        if rich is None or image is None:
            return text
        return Image(number, rich["index"], image)
    if kind == "result" and line.get("start"):
        continues = following is not None and following.get("kind") == "result"
        continues = continues and not following.get("start")
        return f"Out[{number}]:\n{text}" if continues else f"Out[{number}]: {text}"
    return text


def _image_mime(rich: dict[str, Any] | None) -> str | None:
    if rich is None:
        return None
    return next((m for m in rich["mimetypes"] if m in ("image/png", "image/jpeg")), None)


def clipped_suffix(line: Line) -> str:
    """Return the note for a line cut by max_chars (empty when it was not cut)."""
    clipped = line.get("clipped")
    return f" …[+{clipped:,} chars]" if clipped else ""


def omission_line(number: int, first: int, last: int, total: int) -> str:
    """Return the line saying which lines were left out and how to read them."""
    count = last - first + 1
    return (
        f"… {count:,} lines omitted ({first:,}–{last:,} of {total:,}); "
        f'read_output(execution={number}, lines="{first}:{last}") shows them …'
    )


def render_running(execution: dict[str, Any], last: Sequence[Line]) -> str:
    """Return the reply for a cell still running (or waiting for input) when the wait ended."""
    number = execution["number"]
    elapsed = format_elapsed(execution["elapsed"])
    lines: list[str] = []
    request = execution.get("input")
    if execution["state"] == "awaiting_input" and request:
        kind = "a password" if request.get("password") else "input"
        lines.append(f"In [{number}] is waiting for {kind} ({elapsed}): {request['prompt']!r}")
    else:
        lines.append(f"In [{number}] is still running ({elapsed}).")
    if last:
        lines.append("Last lines:")
        lines.extend(line["text"] + clipped_suffix(line) for line in last[-RUNNING_TAIL:])
    else:
        lines.append("No output yet.")
    if unstored_note(execution):
        lines.append(unstored_note(execution))
    if execution["state"] == "awaiting_input":
        lines.append(f'Answer with send_input(value="…", execution={number}), or interrupt().')
    else:
        lines.append(
            f"It keeps running. wait(execution={number}) waits more; read_output and "
            "search_output look at its output; interrupt() stops it."
        )
    return "\n".join(lines)


def render_read(response: dict[str, Any]) -> str:
    """Return a stream read: a header saying which lines of how many, then numbered lines."""
    number, stream, total = response["number"], response["stream"], response["total"]
    lines = response["lines"]
    if total == 0:
        return f"In [{number}] {stream} is empty."
    if not lines:
        return (
            f"In [{number}] {stream} has {total:,} lines; "
            f"lines {response['range']} are past the end."
        )
    first, last = lines[0]["n"], lines[-1]["n"]
    running = " (still running)" if response["state"] in ("running", "awaiting_input") else ""
    header = f"In [{number}] {stream}, lines {first:,}–{last:,} of {total:,}{running}:"
    if response.get("truncated"):
        header += f" (at most {len(lines):,} lines per read; ask for the rest with lines=)"
    width = len(str(last))
    body = [f"{line['n']:>{width}}│{line['text']}{clipped_suffix(line)}" for line in lines]
    return "\n".join([header, *body])


def render_search(response: dict[str, Any], scope: str) -> str:
    """Return search results: M (match) and C (context) lines grouped, `--` between groups."""
    query, mode, stream = response["query"], response["mode"], response["stream"]
    matches = response["matches"]
    groups = response["groups"]
    if not groups:
        return f"No lines match {echo(query)} ({mode}) in {scope} {stream}."
    plural = "match" if matches == 1 else "matches"
    out = [f"{matches} {plural} for {echo(query)} ({mode}) in {scope} {stream}:"]
    previous: int | None = None
    for group in groups:
        if previous is not None:
            out.append("--")
        if group["execution"] != previous:
            out.append(f"In [{group['execution']}]:")
        previous = group["execution"]
        width = len(str(group["lines"][-1]["n"]))
        out.extend(
            f"{line['marker']} {line['n']:>{width}}│{line['text']}" for line in group["lines"]
        )
    if response.get("truncated"):
        out.append(f"(more matches exist; only the first {matches} are shown)")
    return "\n".join(out)


def render_kernel(kernel: dict[str, Any], *, gateway: str) -> str:
    """Return one kernel's summary."""
    name = kernel.get("name") or "(unnamed)"
    lines = [
        f"Kernel {name} [{kernel['id'][:8]}] on {gateway}: {kernel['state']}, "
        f"{kernel['lifetime']}, {kernel.get('kernel_spec') or '?'}",
        f"executions: {kernel['executions']}"
        + (f" (latest In [{kernel['last_execution']}])" if kernel.get("last_execution") else ""),
    ]
    if kernel.get("current_execution"):
        lines.append(f"running: In [{kernel['current_execution']}]")
    if kernel.get("cwd"):
        lines.append(f"cwd: {kernel['cwd']}")
    lines.append(f"connections: {kernel['connections']}")
    return "\n".join(lines)


def render_execution_status(execution: dict[str, Any]) -> str:
    """Return one execution's lifecycle and stream sizes."""
    parts = [f"In [{execution['number']}]: {execution['state']}"]
    parts.append(f"elapsed {format_elapsed(execution['elapsed'])}")
    if execution["state"] in ("running", "awaiting_input"):
        parts.append(f"silent for {format_elapsed(execution['silent_for'])}")
    lines = [", ".join(parts)]
    note = _state_note(execution)
    if note:
        lines.append(note)
    if execution.get("error"):
        lines.append(f"error: {execution['error']['name']}: {execution['error']['value']}")
    sizes = ", ".join(
        f"{name} {size['lines']:,} lines"
        for name, size in execution["streams"].items()
        if size["lines"]
    )
    lines.append(f"streams: {sizes or 'no output'}")
    if unstored_note(execution):
        lines.append(unstored_note(execution))
    if execution.get("rich"):
        lines.append(f"rich outputs: {len(execution['rich'])}")
    lines.append("code:")
    lines.append(_indent(execution["code"]))
    return "\n".join(lines)


def _indent(text: str, limit: int = 20) -> str:
    lines = text.splitlines() or [""]
    shown = [f"  {line}" for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"  … {len(lines) - limit} more lines")
    return "\n".join(shown)


def render_kernels(
    kernels: Sequence[dict[str, Any]], current: str | None, gateway: str, now: float | None = None
) -> str:
    """Return a table of kernels; `*` marks the one this conversation uses."""
    if not kernels:
        return f"No kernels on {gateway}."
    now = time.time() if now is None else now
    rows = [("", "name", "id", "spec", "state", "lifetime", "runs", "idle", "conn")]
    for kernel in kernels:
        last = kernel.get("last_activity")
        rows.append(
            (
                "*" if kernel["id"] == current else "",
                kernel.get("name") or "-",
                kernel["id"][:8],
                kernel.get("kernel_spec") or "-",
                kernel["state"],
                kernel["lifetime"],
                str(kernel["executions"]),
                format_elapsed(now - last) if last else "-",
                str(kernel["connections"]),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join([f"Kernels on {gateway}:", *table])
