"""Which frames of a traceback are shown: ipykernel's and IPython's own frames between the user's
last frame and the exception line are left out, with the messaging they call (a KeyboardInterrupt
can land inside ipykernel's send of an input request), one line saying how many and how to read
them (the record keeps the whole traceback)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath

from loomgate.shared import wire
from loomgate.translator.presentation.audience import Audience, read_call

# A frame's first line in IPython's tracebacks: `File /…/kernelbase.py:1515, in Kernel.raw_input(…)`
# or the cell's own `Cell In[3], line 2`. The frame runs to the blank line after it.
FRAME = re.compile(r"File (?P<file>.+?):\d+(?:, in .*)?|Cell In\[\d+\], line \d+.*")
# The packages whose own frames are left out (their directory in the frame's path).
INTERNAL = re.compile(r"(?:^|[/\\])(?P<package>ipykernel|IPython)[/\\]")
# The messaging the kernel runs on: its frames are the kernel's own when the kernel's called them
# (a compiled frame's path is relative: `zmq/backend/cython/_zmq.py`), the user's otherwise.
MESSAGING = re.compile(r"(?:^|[/\\])(?P<package>jupyter_client|zmq)[/\\]")


@dataclass(frozen=True)
class LeftOutFrames:
    """Lines `first` to `last` of `combined`: `frames` frames of `packages`' own files."""

    first: int
    last: int
    frames: int
    packages: tuple[str, ...]
    files: tuple[str, ...]


@dataclass(frozen=True)
class _Frame:
    """One frame of a traceback: its lines (positions in its block) and its package, if
    internal."""

    first: int
    last: int
    package: str | None
    file: str


def internal_frames(lines: Sequence[wire.Line], total: int) -> list[LeftOutFrames]:
    """Return what to leave out of each whole traceback among `lines` (numbered `combined`
    lines, in order; the output has `total`): the run of ipykernel's and IPython's frames after
    the user's last frame, up to the exception line. A traceback cut short (by a gap in the
    numbers, or the end of `lines` before the output's end) keeps all its frames."""
    left_out: list[LeftOutFrames] = []
    for block in _whole_blocks(lines, total):
        left_out.extend(_after_last_user_frames(block))
    return left_out


def left_out_line(number: int, left: LeftOutFrames, audience: Audience) -> str:
    """Return the line that stands for `left`'s frames and says how to read them."""
    frames = f"{left.frames} frame{'s' if left.frames != 1 else ''}"
    call = read_call(number, "combined", f"{left.first}:{left.last}", audience)
    *others, last = left.packages
    packages = f"{', '.join(others)} and {last}" if others else last
    return f"… {frames} inside {packages} ({', '.join(left.files)}) left out; {call} shows them …"


def left_out_notes(
    number: int, lines: Sequence[wire.Line], total: int, audience: Audience
) -> dict[int, list[str]]:
    """Return, for each line number of In [`number`] left out of `lines` (as in
    `internal_frames`), what is shown instead: the note on its first line, nothing on the
    others."""
    notes: dict[int, list[str]] = {}
    for left in internal_frames(lines, total):
        notes.update((n, []) for n in range(left.first, left.last + 1))
        notes[left.first] = [left_out_line(number, left, audience)]
    return notes


def _whole_blocks(lines: Sequence[wire.Line], total: int) -> list[list[wire.Line]]:
    """Return the error blocks (tracebacks) of `lines` seen from their first line to their
    last."""
    blocks: list[list[wire.Line]] = []
    block: list[wire.Line] = []
    for position, line in enumerate(lines):
        if line.get("kind") != "error":
            continue
        if line.get("start"):
            block = [line]
        elif block and block[-1]["n"] + 1 == line["n"]:
            block.append(line)
        else:
            block = []  # its start was not among the lines
            continue
        following = lines[position + 1] if position + 1 < len(lines) else None
        if following is None:
            ended = line["n"] == total
        else:
            ended = following["n"] == line["n"] + 1 and (
                following.get("kind") != "error" or bool(following.get("start"))
            )
        if ended:
            blocks.append(block)
        if following is None or ended or following["n"] != line["n"] + 1:
            block = []
    return blocks


def _after_last_user_frames(block: Sequence[wire.Line]) -> list[LeftOutFrames]:
    """Return the internal frames between the user's last frame and the exception line of one
    traceback (of each, when exceptions are chained); none where no frame of the user's comes
    before them."""
    runs: list[list[_Frame]] = [[]]  # runs of frames; each but the last ended by an exception
    position = 0
    while position < len(block):
        text = block[position]["text"]
        found = FRAME.fullmatch(text)
        if found is None:
            if text.strip() and runs[-1]:
                runs.append([])
            position += 1
            continue
        last = position
        while last + 1 < len(block) and block[last + 1]["text"].strip():
            last += 1
        file = found["file"] or ""
        package = INTERNAL.search(file) if file else None
        if package is None and file and runs[-1] and runs[-1][-1].package is not None:
            package = MESSAGING.search(file)
        runs[-1].append(_Frame(position, last, package["package"] if package else None, file))
        position = last + 1
    left_out: list[LeftOutFrames] = []
    for run in runs[:-1]:
        users = [i for i, frame in enumerate(run) if frame.package is None]
        if not users or users[-1] == len(run) - 1:
            continue
        internal = run[users[-1] + 1 :]
        left_out.append(
            LeftOutFrames(
                first=block[internal[0].first]["n"],
                last=block[internal[-1].last]["n"],
                frames=len(internal),
                packages=tuple(dict.fromkeys(f.package for f in internal if f.package)),
                files=tuple(dict.fromkeys(PurePath(f.file).name for f in internal)),
            )
        )
    return left_out
