"""Who reads (the model: tool results, it calls tools; the person: a terminal, commands), and
the call each makes to read on."""

from __future__ import annotations

from typing import Literal

from loomgate.shared import wire

# The model reads tool results and calls tools; the person reads a terminal and runs commands.
Audience = Literal["model", "person"]


def read_call(number: int, stream: wire.StreamName, lines: str, audience: Audience) -> str:
    """Return the call (tool or command) that reads `lines` of a stream."""
    if audience == "person":
        chosen = "" if stream == "combined" else f" --stream {stream}"
        return f"`loomgate output {number}{chosen} --lines {lines}`"
    chosen = "" if stream == "combined" else f', stream="{stream}"'
    return f'read_output(execution={number}{chosen}, lines="{lines}")'
