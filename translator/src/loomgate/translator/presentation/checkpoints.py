"""A kernel's checkpoints in words: the one taken, the list in a kernel's status, a rollback,
a fork's origin."""

from __future__ import annotations

import time
from collections.abc import Sequence

from loomgate.shared import wire
from loomgate.shared.sizes import format_size
from loomgate.translator.presentation.cells import format_elapsed


def checkpoint_phrase(checkpoint: wire.Checkpoint, now: float) -> str:
    """Return one checkpoint as a phrase: its name, its state, its age and the memory it holds."""
    held = checkpoint["held"]
    holds = f", holds {format_size(held)}" if held is not None else ""
    age = format_elapsed(max(0.0, now - checkpoint["created"]))
    return f"{checkpoint['name']} (the state after In [{checkpoint['after']}], {age} ago{holds})"


def checkpoint_lines(checkpoints: Sequence[wire.Checkpoint], now: float | None = None) -> list[str]:
    """Return a kernel status's line of its checkpoints (none when it has none)."""
    if not checkpoints:
        return []
    now = time.time() if now is None else now
    return ["checkpoints: " + "; ".join(checkpoint_phrase(c, now) for c in checkpoints)]


def checkpoint_note(label: str, reply: wire.CheckpointReply) -> str:
    """Return what a checkpoint did, and what a copy of the kernel does not carry."""
    checkpoint = reply["checkpoint"]
    lines = [
        f"Checkpoint {checkpoint['name']} of kernel {label} keeps its state after "
        f"In [{checkpoint['after']}]; rollback(to={checkpoint['name']!r}) brings it back."
    ]
    lines += [f"Not in it: {lack}." for lack in reply["lacks"]]
    return "\n".join(lines)


def rollback_note(label: str, checkpoint: wire.Checkpoint) -> str:
    """Return what a rollback did."""
    return (
        f"Kernel {label} was rolled back to {checkpoint['name']} (the state after "
        f"In [{checkpoint['after']}]); records and numbering are kept, and the checkpoint stays."
    )


def fork_lines(kernel: wire.Kernel) -> list[str]:
    """Return the line saying what a fork was copied from (none for a kernel that is not one)."""
    origin = kernel.get("forked_from")  # absent: a gateway before forks
    if origin is None:
        return []
    who = origin["name"] or origin["kernel"][:8]
    state = f"its checkpoint {origin['checkpoint']}" if origin["checkpoint"] else "its state"
    return [
        f"It starts as a copy of kernel {who}: {state} after In [{origin['after']}] (that "
        "kernel is untouched); its own cells are numbered from In [1].",
        *(f"Not in it: {lack}." for lack in origin.get("lacks", [])),  # absent: an older gateway
    ]
