"""The eleven MCP tools as the model sees them: names, arguments, descriptions, output schemas."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import BaseModel, Field

from loomgate.translator.cell_follower import NeedsInput
from loomgate.translator.results import (
    CellResult,
    KernelAction,
    KernelsResult,
    ReadResult,
    SearchResult,
    StatusResult,
)
from loomgate.translator.tools import Tools, guarded

KernelArg = Annotated[
    str | None, Field(description="kernel name or id prefix (default: this conversation's)")
]
ExecutionArg = Annotated[
    int | None, Field(description="execution number N of In [N] (default: running, else latest)")
]


Stream = Literal["combined", "stdout", "stderr", "result", "traceback"]
ToolResult = CallToolResult | InputRequiredResult


def tools_of(ctx: Context) -> Tools:
    """Return the conversation's tools from the server lifespan."""
    return ctx.request_context.lifespan_context  # type: ignore[no-any-return]


async def with_input(ctx: Context, call: Callable[[], Awaitable[CallToolResult]]) -> ToolResult:
    """Run a waiting tool; return an input-required result when the cell asks for input."""
    if ctx.request_state:
        call = lambda: tools_of(ctx).resume(ctx)  # noqa: E731  (the host answered a dialog)
    try:
        return await guarded(call)
    except NeedsInput as needs:
        return needs.result


async def run_cell(
    code: Annotated[str, Field(description="Python source of the cell")],
    ctx: Context,
    wait_seconds: Annotated[
        float, Field(ge=0, le=3600, description="how long to wait before replying")
    ] = 10,
    full_output: Annotated[
        bool, Field(description="return all output once finished, not head and tail")
    ] = False,
    kernel: KernelArg = None,
) -> Any:
    """Run a Python cell in the persistent kernel and wait up to wait_seconds for it.

    Variables persist between cells. If the cell is still running when the wait ends it keeps
    running: continue with wait, read_output, search_output or interrupt. Long output is shown
    as head and tail; read_output gets the rest.
    """
    tools = tools_of(ctx)
    return await with_input(
        ctx, lambda: tools.run_cell(ctx, code, wait_seconds, full_output, kernel)
    )


async def wait(
    ctx: Context,
    execution: ExecutionArg = None,
    timeout_seconds: Annotated[float, Field(ge=0, le=3600)] = 30,
    until_silent_seconds: Annotated[
        float | None, Field(gt=0, le=3600, description="return early after this much silence")
    ] = None,
    kernel: KernelArg = None,
) -> Any:
    """Wait more for a running cell without interrupting it; show its output when it ends."""
    tools = tools_of(ctx)
    return await with_input(
        ctx,
        lambda: tools.wait(ctx, execution, timeout_seconds, until_silent_seconds, kernel),
    )


async def read_output(
    ctx: Context,
    execution: ExecutionArg = None,
    stream: Stream = "combined",
    lines: Annotated[
        str | None,
        Field(
            description='"start:stop", 1-based inclusive, negatives from the end: ":10", '
            '"-20:", "100:120"'
        ),
    ] = None,
    max_chars: Annotated[int | None, Field(ge=1, description="clip each line to this")] = None,
    kernel: KernelArg = None,
) -> Any:
    """Read lines of a cell's output (any range, with line numbers), e.g. what was omitted."""
    tools = tools_of(ctx)
    return await guarded(lambda: tools.read_output(execution, stream, lines, max_chars, kernel))


async def search_output(
    query: Annotated[str, Field(min_length=1, description="text or regular expression")],
    ctx: Context,
    execution: Annotated[
        int | Literal["all"] | None,
        Field(description='an execution number, or "all" (default: running, else latest)'),
    ] = None,
    stream: Stream = "combined",
    mode: Literal["auto", "literal", "regex"] = "auto",
    context: Annotated[int, Field(ge=0, le=100)] = 0,
    ignore_case: bool = False,
    max_matches: Annotated[int, Field(ge=1, le=1000)] = 50,
    kernel: KernelArg = None,
) -> Any:
    """Find lines in a cell's output, or in all cells' (execution="all"), with context lines."""
    tools = tools_of(ctx)
    return await guarded(
        lambda: tools.search_output(
            query, execution, stream, mode, context, ignore_case, max_matches, kernel
        )
    )


async def interrupt(ctx: Context, kernel: KernelArg = None) -> Any:
    """Interrupt the running cell (KeyboardInterrupt) and show how it ended."""
    tools = tools_of(ctx)
    return await guarded(lambda: tools.interrupt(ctx, kernel))


async def reset(ctx: Context, kernel: KernelArg = None) -> Any:
    """Restart the kernel: variables are cleared; execution records and numbering are kept."""
    tools = tools_of(ctx)
    return await guarded(lambda: tools.reset(kernel))


async def send_input(
    value: Annotated[str, Field(description="the text input() should return")],
    ctx: Context,
    execution: ExecutionArg = None,
    kernel: KernelArg = None,
) -> Any:
    """Answer a cell waiting in input() (when the host showed no input dialog)."""
    tools = tools_of(ctx)
    return await with_input(ctx, lambda: tools.send_input(ctx, value, execution, kernel))


async def status(ctx: Context, execution: ExecutionArg = None, kernel: KernelArg = None) -> Any:
    """Show the kernel's state, or one execution's lifecycle and output sizes."""
    tools = tools_of(ctx)
    return await guarded(lambda: tools.status(execution, kernel))


async def connect(
    kernel: Annotated[str, Field(min_length=1, description="kernel name (or id prefix)")],
    ctx: Context,
    gateway: Annotated[
        str | None, Field(description="a gateways.toml name or URL (default: current)")
    ] = None,
    kernel_spec: Annotated[str | None, Field(description="kernel spec for a new kernel")] = None,
) -> Any:
    """Attach to a named persistent kernel (created if missing); later conversations can too."""
    tools = tools_of(ctx)
    return await guarded(lambda: tools.connect(kernel, gateway, kernel_spec))


async def list_kernels(
    ctx: Context,
    gateway: Annotated[str | None, Field(description="a gateways.toml name or URL")] = None,
) -> Any:
    """List the gateway's kernels; * marks the one this conversation uses."""
    tools = tools_of(ctx)
    return await guarded(lambda: tools.list_kernels(gateway))


async def stop_kernel(
    kernel: Annotated[str, Field(min_length=1, description="kernel name or id prefix")],
    ctx: Context,
) -> Any:
    """Stop a kernel and free its memory; its execution records stay readable."""
    tools = tools_of(ctx)
    return await guarded(lambda: tools.stop_kernel(kernel))


TOOLS: list[tuple[Callable[..., Awaitable[Any]], type[BaseModel], bool]] = [
    (run_cell, CellResult, True),
    (wait, CellResult, True),
    (read_output, ReadResult, False),
    (search_output, SearchResult, False),
    (interrupt, CellResult, False),
    (reset, KernelAction, False),
    (send_input, CellResult, True),
    (status, StatusResult, False),
    (connect, KernelAction, False),
    (list_kernels, KernelsResult, False),
    (stop_kernel, KernelAction, False),
]


def register_tools(server: MCPServer[Any], structured: bool) -> None:
    """Register every tool; in structured mode each gets its output schema."""
    for fn, model, may_need_input in TOOLS:
        if structured:
            returns: Any = Annotated[CallToolResult, model]
        else:
            returns = CallToolResult
        if may_need_input:
            returns = returns | InputRequiredResult
        fn.__annotations__["return"] = returns
        server.add_tool(fn, structured_output=None if structured else False)
