"""A cell as it reads: its header, its output lines in order (images in place), and its end;
and its status (lifecycle and stream sizes)."""

from __future__ import annotations

from collections.abc import Sequence

from loomgate.shared import wire
from loomgate.shared.wire import RUNNING_STATES
from loomgate.translator.output_view import (
    Block,
    CellOutput,
    Image,
    OutputLimits,
    fit,
)
from loomgate.translator.presentation.audience import Audience, read_call
from loomgate.translator.presentation.sandboxes import sandbox_rule_line
from loomgate.translator.presentation.tracebacks import left_out_notes

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


def state_note(execution: wire.Execution) -> str:
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
    return note or ""  # how an ended cell's end was seen, when not from the kernel's idle


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
    """Return the note on output that may be missing: the gateway was down while the cell ran
    on, or the kernel dropped messages."""
    if gap.get("by") == "upstream":
        return (
            f"[output after line {gap['after_line']:,} may be missing: the upstream server held "
            "some back (its IOPub rate limit: ServerApp.iopub_msg_rate_limit there)]"
        )
    dropped = gap.get("dropped")
    if dropped:
        noun = "message" if dropped == 1 else "messages"
        return (
            f"[output after line {gap['after_line']:,} may be missing: the kernel dropped "
            f"{dropped:,} {noun} it could not send fast enough]"
        )
    return (
        f"[output after line {gap['after_line']:,} may be missing: no gateway listened for "
        f"{format_elapsed(gap['until'] - gap['since'])} (it was down, then took the kernel back)]"
    )


def cell_header(execution: wire.Execution, language: str | None = None) -> str:
    """Return `In [N] (elapsed):`, with the end state when it is not a plain finish, and the
    kernel's `language` when given (a conversation with kernels of several)."""
    parts = [language] if language else []
    parts.append(format_elapsed(execution["elapsed"]))
    note = state_note(execution)
    if note:
        parts.append(note)
    return f"In [{execution['number']}] ({', '.join(parts)}):"


def render_cell(
    execution: wire.Execution,
    output: CellOutput,
    limits: OutputLimits | None = None,
    audience: Audience = "model",
    sandbox: wire.Sandbox | None = None,
    language: str | None = None,
) -> list[Block]:
    """Return a finished (or stopped) cell as IPython shows it: header (with the kernel's
    `language`, when given), output, Out[N], and the sandbox rule it broke (told with its
    kernel's `sandbox` when known)."""
    limits = limits or OutputLimits()
    number = execution["number"]
    head, tail = fit(output.head, output.tail, limits)
    missing: dict[int, list[str]] = {}  # notes of output the gateway missed, by the line before
    for gap in execution["gaps"]:
        missing.setdefault(gap["after_line"], []).append(gap_note(gap))
    blocks: list[Block] = []
    text: list[str] = [cell_header(execution, language), *missing.pop(0, [])]
    shown = len(head) + len(tail)
    head_end = head[-1]["n"] if head else 0
    left_out = left_out_notes(number, head + tail, output.total, audience)
    for position, line in enumerate(head + tail):
        if tail and position == len(head) and shown < output.total:
            first = head_end + 1
            last = tail[0]["n"] - 1
            text.append(omission_line(number, first, last, output.total, audience))
        following = (head + tail)[position + 1] if position + 1 < shown else None
        if line["n"] in left_out:  # ipykernel's or IPython's own frame: one note for them all
            text.extend(left_out[line["n"]])
            text.extend(missing.pop(line["n"], []))
            continue
        piece = _render_line(execution, line, following)
        if isinstance(piece, Image):
            blocks.append("\n".join(text))
            blocks.append(piece)
            text = []
        elif piece is not None:
            text.append(piece)
        text.extend(missing.pop(line["n"], []))
    if not tail and shown < output.total:
        text.append(omission_line(number, head_end + 1, output.total, output.total, audience))
    if unstored_note(execution):
        text.append(unstored_note(execution))
    text.extend(note for notes in missing.values() for note in notes)  # in omitted lines
    failure = execution.get("sandbox_failure")
    if failure is not None:
        text.append(sandbox_rule_line(failure, sandbox))
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


def omission_line(
    number: int, first: int, last: int, total: int, audience: Audience = "model"
) -> str:
    """Return the line saying which lines were left out and how to read them."""
    count = last - first + 1
    call = read_call(number, "combined", f"{first}:{last}", audience)
    return f"… {count:,} lines omitted ({first:,}–{last:,} of {total:,}); {call} shows them …"


def answer_call(number: int, audience: Audience) -> str:
    """Return the call (tool or command) that answers In [`number`]'s input()."""
    if audience == "person":
        return f"`loomgate input {number} TEXT`"
    return f'send_input(value="…", execution={number})'


def input_ended_note(number: int) -> str:
    """Return the note that stdin ended while In [`number`] waited for input (it is
    interrupted, as input() fails at the end of its input)."""
    return (
        f"stdin ended while In [{number}] waits for input; interrupting it "
        f"(`loomgate input {number} TEXT` answers a cell from another shell)"
    )


def render_running(
    execution: wire.Execution,
    last: Sequence[wire.Line],
    audience: Audience = "model",
    answer: str | None = None,
    language: str | None = None,
) -> str:
    """Return the reply for a cell still running (or waiting for input) when the wait ended;
    `answer` says how to answer its input() where the reader has no call for it; `language`
    is the kernel's, when given (a conversation with kernels of several)."""
    number = execution["number"]
    elapsed = format_elapsed(execution["elapsed"])
    if language:
        elapsed = f"{language}, {elapsed}"
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
        stop = "`loomgate interrupt`" if audience == "person" else "interrupt()"
        lines.append(answer or f"Answer with {answer_call(number, audience)}, or {stop}.")
    elif audience == "person":
        lines.append(
            f"It keeps running. `loomgate wait {number}` waits more; `loomgate output {number}` "
            "and `loomgate search` look at its output; `loomgate interrupt` stops it."
        )
    else:
        lines.append(
            f"It keeps running. wait(execution={number}) waits more; read_output and "
            "search_output look at its output; interrupt() stops it."
        )
    return "\n".join(lines)


def input_dialog_message(number: int, prompt: str) -> str:
    """Return what the host's input dialog shows for In [`number`]'s input() `prompt`."""
    return f"In [{number}] asks for input: {prompt}"


def progress_message(number: int | None, waited: float, last_line: str = "") -> str:
    """Return the progress line of In [`number`] (None: not known yet) still running after
    `waited` seconds: its last output line (clipped to 200 characters), if it printed one."""
    cell = f"In [{number}] running" if number is not None else "Running"
    return f"{cell} {waited:.0f} s" + (f": {last_line[:200]}" if last_line else "")


def image_over_count(image: Image, limit: int) -> str:
    """Return what stands for an image past the `limit` a result shows."""
    return f"{_unshown(image)}: at most {limit} per result]"


def image_over_size(image: Image, max_bytes: int) -> str:
    """Return what stands for an image larger than `max_bytes` (a whole number of MB)."""
    return f"{_unshown(image)}: larger than {max_bytes >> 20} MB]"


def _unshown(image: Image) -> str:
    return f"[image {image.index} of In [{image.execution}] not shown"


def cell_text(
    execution: wire.Execution,
    limits: OutputLimits | None = None,
    audience: Audience = "person",
    sandbox: wire.Sandbox | None = None,
) -> str:
    """Return an execution as the model reads it, for a terminal: images named, not shown."""
    output = CellOutput.from_gateway(execution.get("output"))
    blocks = render_cell(execution, output, limits, audience, sandbox)
    return "\n".join(
        block if isinstance(block, str) else f"[image {block.index}: {block.mime}]"
        for block in blocks
    )


def render_execution_status(execution: wire.Execution, sandbox: wire.Sandbox | None = None) -> str:
    """Return one execution's lifecycle and stream sizes (and the sandbox rule it broke, told
    with its kernel's `sandbox` when known)."""
    parts = [f"In [{execution['number']}]: {execution['state']}"]
    parts.append(f"elapsed {format_elapsed(execution['elapsed'])}")
    if execution["state"] in RUNNING_STATES:
        parts.append(f"silent for {format_elapsed(execution['silent_for'])}")
    lines = [", ".join(parts)]
    note = state_note(execution)
    if note:
        lines.append(note)
    error = execution["error"]
    if error:
        lines.append(f"error: {error_words(error)}")
    failure = execution.get("sandbox_failure")
    if failure is not None:
        lines.append(sandbox_rule_line(failure, sandbox))
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


def error_words(error: wire.ErrorInfo) -> str:
    """Return an error's name and value as one phrase (bash_kernel names none: its value is the
    exit status)."""
    name, value = error["name"], error["value"]
    if name and value:
        return f"{name}: {value}"
    if value:
        return f"{value} (the kernel named no error)"
    return name or "(the kernel gave no name and no value)"
