"""The event stream's contract: what the gateway publishes over SSE, and the tool calls a
translator reports for the monitor, typed once (docs/protocol.md describes each field)."""

from __future__ import annotations

from typing import Literal, TypedDict

from loomgate.shared.wire import Execution, Kernel

EventName = Literal["hello", "kernel", "holders", "execution", "output", "tool_call"]
KernelPhase = Literal["ready", "restarting", "dead", "stopped", "checkpoints"]


class HelloEvent(TypedDict):
    """The first event of a stream: the kernel it follows, or None for all kernels."""

    event: Literal["hello"]
    kernel: Kernel | None


class _Published(TypedDict):
    id: int
    kernel_id: str
    time: float


class _KernelEventBase(_Published):
    event: Literal["kernel"]
    phase: KernelPhase
    kernel: Kernel


class KernelEvent(_KernelEventBase, total=False):
    """A kernel started, restarts, died or stopped; `reason` only when it died."""

    reason: str


class HoldersEvent(_Published):
    """A holder connected or went away."""

    event: Literal["holders"]
    holders: int


class ExecutionEvent(_Published):
    """An execution started, waits for input, got its input, or ended."""

    event: Literal["execution"]
    execution: Execution


class OutputEvent(_Published):
    """Output arrived (at most one such event every 0.1 s per execution)."""

    event: Literal["output"]
    number: int
    lines: int
    last_line: str


# -- tool calls -------------------------------------------------------------------------------

TOOL_CALL_TEXT = 300  # characters a translator keeps of a summary or of one argument's value
TOOL_CALL_TEXT_KEPT = 2 * TOOL_CALL_TEXT  # what a gateway keeps of one (a bound, not a format)
TOOL_CALL_ARGUMENTS = 20  # arguments kept of one call


class _ToolCallBase(TypedDict):
    conversation: str
    tool: str
    arguments: dict[str, str]
    summary: str
    error: bool
    started: float
    duration: float
    kernel_id: str | None


class ToolCallReport(_ToolCallBase, total=False):
    """What a translator reports of one tool call it answered (each text already shortened)."""

    client: str


class ToolCall(ToolCallReport):
    """A reported tool call as the gateway keeps it, numbered in arrival order."""

    id: int


class ToolCallList(TypedDict):
    """The tool calls the gateway keeps (the most recent ones, oldest first)."""

    tool_calls: list[ToolCall]


class ToolCallEvent(TypedDict):
    """A translator reported a tool call; `kernel_id` is its conversation's kernel, if any."""

    id: int
    event: Literal["tool_call"]
    kernel_id: str | None
    time: float
    tool_call: ToolCall


def shortened(text: str, limit: int = TOOL_CALL_TEXT) -> str:
    """Return `text` cut to `limit` characters, saying how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit} characters)"


Event = HelloEvent | KernelEvent | HoldersEvent | ExecutionEvent | OutputEvent | ToolCallEvent
