"""The wire vocabulary both halves share: output kinds, record states, and JSON shapes."""

from __future__ import annotations

import enum
from typing import Literal


class OutputKind(enum.IntEnum):
    """What produced a line of the `combined` stream (stored as the line's tag)."""

    STDOUT = 1
    STDERR = 2
    RESULT = 3  # text/plain of an execute_result: the only output labelled Out[N]
    DISPLAY = 4  # text/plain of a display_data without a rich (image) part
    ERROR = 5  # traceback lines of an error
    RICH = 6  # text/plain stand-in of a display_data/execute_result that carries an image


PART_START = 0x80  # tag flag: this line starts a new output (a new result/display/error)
KIND_MASK = 0x7F

STREAMS: tuple[str, ...] = ("combined", "stdout", "stderr", "result", "traceback")
StreamName = Literal["combined", "stdout", "stderr", "result", "traceback"]

ExecutionState = Literal[
    "running", "awaiting_input", "completed", "error", "interrupted", "killed", "died", "lost"
]
FINAL_STATES: frozenset[str] = frozenset(
    {"completed", "error", "interrupted", "killed", "died", "lost"}
)
Lifetime = Literal["persistent", "conversation"]
