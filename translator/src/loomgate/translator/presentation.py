"""What a model (or a person) reads: records, reads, searches and kernels as concise text.

The one place where the gateway's wire shapes become words. Where the model and the person need
different words for one fact (a busy kernel, say), both are written here, side by side.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal

from loomgate.shared import wire
from loomgate.shared.echo import echo
from loomgate.shared.wire import RUNNING_STATES
from loomgate.translator.output_view import Block, CellOutput, Image, OutputLimits, fit

# The model reads tool results and calls tools; the person reads a terminal and runs commands.
Audience = Literal["model", "person"]
RUNNING_TAIL = 10  # last lines shown of a cell still running


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


def _state_note(execution: wire.Execution) -> str:
    state = execution["state"]
    note = execution["note"]
    if state == "interrupted":
        return "interrupted"
    if state == "killed":
        return f"killed: {note}" if note else "killed"
    if state == "died":
        died = execution["died"]
        restarted = (
            "the kernel was restarted and its variables are gone"
            if died and died["restarted"]
            else "the kernel is dead"
        )
        reason = died["reason"] if died else "the kernel process died"
        return f"died: {reason}; {restarted}"
    if state == "lost":
        return f"lost: {note}" if note else "lost"
    return ""


def unstored_note(execution: wire.Execution) -> str:
    """Return the note on output the gateway's disk refused ("" when all of it was stored)."""
    unstored = execution["unstored"]
    if not unstored:
        return ""
    return (
        f"[output from line {unstored['from_line']:,} on was not stored: {unstored['reason']}; "
        "the gateway's state dir needs space or write permission]"
    )


def gap_note(gap: wire.Gap) -> str:
    """Return the note on output the gateway may have missed (it was down; the cell ran on)."""
    return (
        f"[output after line {gap['after_line']:,} may be missing: no gateway listened for "
        f"{format_elapsed(gap['until'] - gap['since'])} (it was down, then took the kernel back)]"
    )


def cell_header(execution: wire.Execution) -> str:
    """Return `In [N] (elapsed):`, with the end state when it is not a plain finish."""
    parts = [format_elapsed(execution["elapsed"])]
    note = _state_note(execution)
    if note:
        parts.append(note)
    return f"In [{execution['number']}] ({', '.join(parts)}):"


def render_cell(
    execution: wire.Execution, output: CellOutput, limits: OutputLimits | None = None
) -> list[Block]:
    """Return a finished (or stopped) cell as IPython shows it: header, output, Out[N]."""
    limits = limits or OutputLimits()
    number = execution["number"]
    head, tail = fit(output.head, output.tail, limits)
    missing: dict[int, list[str]] = {}  # notes of output the gateway missed, by the line before
    for gap in execution["gaps"]:
        missing.setdefault(gap["after_line"], []).append(gap_note(gap))
    blocks: list[Block] = []
    text: list[str] = [cell_header(execution), *missing.pop(0, [])]
    shown = len(head) + len(tail)
    head_end = head[-1]["n"] if head else 0
    for position, line in enumerate(head + tail):
        if tail and position == len(head) and shown < output.total:
            first = head_end + 1
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
        text.extend(missing.pop(line["n"], []))
    if not tail and shown < output.total:
        text.append(omission_line(number, head_end + 1, output.total, output.total))
    if unstored_note(execution):
        text.append(unstored_note(execution))
    text.extend(note for notes in missing.values() for note in notes)  # in omitted lines
    if text:
        blocks.append("\n".join(text))
    return [b for b in blocks if not (isinstance(b, str) and not b)]


def _render_line(
    execution: wire.Execution, line: wire.Line, following: wire.Line | None
) -> Block | None:
    """Return one line as the model reads it: an image in place, `Out[N]:` on a result."""
    if line.get("kind") == "rich":
        if not line.get("start"):
            return None  # the text/plain stand-in of an image is not shown beside it
        rich = next((r for r in execution["rich"] if r["line"] == line["n"]), None)
        image = _image_mime(rich)
        if rich is None or image is None:
            return line["text"] + clipped_suffix(line)
        return Image(execution["number"], rich["index"], image)
    return output_line(execution["number"], line, following)


def output_line(number: int, line: wire.Line, following: wire.Line | None) -> str:
    """Return a line of In [N]'s output as IPython shows it: `Out[N]:` on a result's first line.

    A result of several lines gets its label on a line of its own, as IPython does.
    """
    text = line["text"] + clipped_suffix(line)
    if line.get("kind") == "result" and line.get("start"):
        continues = (
            following is not None
            and following.get("kind") == "result"
            and not following.get("start")
        )
        return f"Out[{number}]:\n{text}" if continues else f"Out[{number}]: {text}"
    return text


def _image_mime(rich: wire.RichEntry | None) -> str | None:
    """Return the MIME type under which a rich output is shown as an image, if any."""
    if rich is None:
        return None
    return next((m for m in rich["mimetypes"] if m in ("image/png", "image/jpeg")), None)


def clipped_suffix(line: wire.Line) -> str:
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


def render_running(execution: wire.Execution, last: Sequence[wire.Line]) -> str:
    """Return the reply for a cell still running (or waiting for input) when the wait ended."""
    number = execution["number"]
    elapsed = format_elapsed(execution["elapsed"])
    lines: list[str] = []
    request = execution["input"]
    if execution["state"] == "awaiting_input" and request:
        kind = "a password" if request["password"] else "input"
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
    lines.extend(gap_note(gap) for gap in execution["gaps"])
    if execution["state"] == "awaiting_input":
        lines.append(f'Answer with send_input(value="…", execution={number}), or interrupt().')
    else:
        lines.append(
            f"It keeps running. wait(execution={number}) waits more; read_output and "
            "search_output look at its output; interrupt() stops it."
        )
    return "\n".join(lines)


def render_read(response: wire.StreamRead) -> str:
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
    running = " (still running)" if response["state"] in RUNNING_STATES else ""
    header = f"In [{number}] {stream}, lines {first:,}–{last:,} of {total:,}{running}:"
    if response["truncated"]:
        header += f" (at most {len(lines):,} lines per read; ask for the rest with lines=)"
    width = len(str(last))
    body = [f"{line['n']:>{width}}│{line['text']}{clipped_suffix(line)}" for line in lines]
    return "\n".join([header, *body])


def render_search(response: wire.SearchReply, scope: str) -> str:
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
    if response["truncated"]:
        out.append(f"(more matches exist; only the first {matches} are shown)")
    return "\n".join(out)


def render_kernel(kernel: wire.Kernel, *, gateway: str) -> str:
    """Return one kernel's summary."""
    name = kernel["name"] or "(unnamed)"
    latest = kernel["last_execution"]
    lines = [
        f"Kernel {name} [{kernel['id'][:8]}] on {gateway}: {kernel['state']}, "
        f"{kernel['lifetime']}, {kernel['kernel_spec'] or '?'}",
        f"executions: {kernel['executions']}" + (f" (latest In [{latest}])" if latest else ""),
    ]
    if kernel["current_execution"]:
        lines.append(f"running: In [{kernel['current_execution']}]")
    if kernel["cwd"]:
        lines.append(f"cwd: {kernel['cwd']}")
    lines.append(f"connections: {kernel['connections']}")
    return "\n".join(lines)


def render_execution_status(execution: wire.Execution) -> str:
    """Return one execution's lifecycle and stream sizes."""
    parts = [f"In [{execution['number']}]: {execution['state']}"]
    parts.append(f"elapsed {format_elapsed(execution['elapsed'])}")
    if execution["state"] in RUNNING_STATES:
        parts.append(f"silent for {format_elapsed(execution['silent_for'])}")
    lines = [", ".join(parts)]
    note = _state_note(execution)
    if note:
        lines.append(note)
    error = execution["error"]
    if error:
        lines.append(f"error: {error['name']}: {error['value']}")
    sizes = ", ".join(
        f"{name} {size['lines']:,} lines"
        for name, size in execution["streams"].items()
        if size["lines"]
    )
    lines.append(f"streams: {sizes or 'no output'}")
    if unstored_note(execution):
        lines.append(unstored_note(execution))
    lines.extend(gap_note(gap) for gap in execution["gaps"])
    if execution["rich"]:
        lines.append(f"rich outputs: {len(execution['rich'])}")
    lines.append("code:")
    lines.append(_indent(execution["code"]))
    return "\n".join(lines)


def _indent(text: str, limit: int = 20) -> str:
    """Return `text` indented two spaces, at most `limit` lines of it."""
    lines = text.splitlines() or [""]
    shown = [f"  {line}" for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"  … {len(lines) - limit} more lines")
    return "\n".join(shown)


def render_kernels(
    kernels: Sequence[wire.Kernel], current: str | None, gateway: str, now: float | None = None
) -> str:
    """Return a table of kernels; `*` marks the one this conversation uses."""
    if not kernels:
        return f"No kernels on {gateway}."
    now = time.time() if now is None else now
    rows = [("", "name", "id", "spec", "state", "lifetime", "runs", "idle", "conn")]
    for kernel in kernels:
        last = kernel["last_activity"]
        rows.append(
            (
                "*" if kernel["id"] == current else "",
                kernel["name"] or "-",
                kernel["id"][:8],
                kernel["kernel_spec"] or "-",
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


def kernel_label(kernel: wire.Kernel) -> str:
    """Return a kernel's name, or its short id."""
    return kernel["name"] or kernel["id"][:8]


def cell_text(execution: wire.Execution, limits: OutputLimits | None = None) -> str:
    """Return an execution as the model reads it, for a terminal: images named, not shown."""
    blocks = render_cell(execution, CellOutput.from_gateway(execution.get("output")), limits)
    return "\n".join(
        block if isinstance(block, str) else f"[image {block.index}: {block.mime}]"
        for block in blocks
    )


def busy_refusal(running: int | None, audience: Audience) -> str:
    """Return why a cell was not run: the kernel runs In [`running`] (None: one is starting)."""
    if audience == "model":
        if running is None:
            return (
                "The kernel is busy starting another cell; the cell was not run. "
                "Try again in a moment."
            )
        return (
            f"The kernel is busy running In [{running}]; the cell was not run. "
            f"Use wait(execution={running}) to wait for it or interrupt() to stop it."
        )
    if running is None:
        return "the kernel is busy starting another cell; try again"
    return f"the kernel is busy running In [{running}]; wait for it or run `loomgate interrupt`"


def dismissed_dialog_note(number: int) -> str:
    """Return the note for an input dialog the person dismissed (the cell still waits)."""
    return (
        f"The input dialog was dismissed; In [{number}] still waits for input. "
        f'Answer with send_input(value="…", execution={number}) or interrupt().'
    )
