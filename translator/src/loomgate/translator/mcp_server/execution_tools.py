"""The tools that run and inspect cells, each defined once: arguments, description, behaviour.

run_cell, wait, read_output, search_output, interrupt, send_input and status.
"""

from __future__ import annotations

import time
from typing import Annotated, Literal

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import Field

from loomgate.shared.wire import SearchMode, StreamName
from loomgate.translator.client.errors import Busy, Conflict, NotFound, Unavailable
from loomgate.translator.mcp_server.cell_follower import INPUT_WAIT, CellFollower
from loomgate.translator.mcp_server.results import (
    CellResult,
    KernelInfo,
    ReadResult,
    SearchResult,
    StatusResult,
    text_block,
    tool_result,
)
from loomgate.translator.mcp_server.tool_registry import (
    ExecutionArg,
    KernelArg,
    ToolFailure,
    conversation_of,
    tool,
)
from loomgate.translator.notebook_file import NotebookPathRefused, inside
from loomgate.translator.notebook_file import save_notebook as save_notebook_file
from loomgate.translator.output_view import SearchPage, leading
from loomgate.translator.presentation import (
    busy_refusal,
    kernel_gone_refusal,
    not_waiting_for_input,
    notebook_path_refusal,
    nothing_to_interrupt,
    past_the_end,
    read_on,
    render_execution_status,
    render_kernel,
    render_read,
    render_search,
    saved_note,
    search_scope,
    unknown_kernel_refusal,
)

INTERRUPT_WAIT = 10.0

LinesArg = Annotated[
    str | None,
    Field(
        description='"start:stop", 1-based inclusive, negatives from the end: ":10", '
        '"-20:", "100:120"'
    ),
]
CellReply = Annotated[CallToolResult, CellResult] | InputRequiredResult
# How long run_cell and wait wait, one name in both; wait also takes its earlier name,
# timeout_seconds, unadvertised (argument_errors.FORMER_NAMES).
WaitSecondsArg = Annotated[
    float, Field(ge=0, le=3600, description="how long to wait before replying")
]


@tool
async def run_cell(
    code: Annotated[str, Field(description="Python source of the cell")],
    ctx: Context,
    wait_seconds: WaitSecondsArg = 10,
    full_output: Annotated[
        bool,
        Field(
            description="once finished, show the output from its first line instead of head "
            "and tail (as much as the reply holds; read_output reads on)"
        ),
    ] = False,
    kernel: KernelArg = None,
) -> CellReply:
    """Run a Python cell in the persistent kernel and wait up to wait_seconds for it.

    Variables persist between cells. If the cell is still running when the wait ends it keeps
    running: continue with wait, read_output, search_output or interrupt. Long output is shown
    as head and tail; read_output gets the rest.
    """
    conversation = conversation_of(ctx)
    follower = CellFollower(conversation)
    client, ref = await conversation.kernel_ref(kernel, create=True)
    startup = conversation.take_startup_output()
    deadline = time.monotonic() + wait_seconds
    async with follower.progress(ctx, client, ref) as progress:
        try:
            async with progress.beside(None):  # the one request: the cell's whole wait
                response = await client.submit(
                    ref, code, wait=wait_seconds, **follower.output_args()
                )
        except Busy as e:
            raise ToolFailure(
                busy_refusal(e.details.get("running"), "model", e.details.get("setup"))
            ) from None
        except Unavailable as e:
            gone = e.details.get("kernel_id")
            if gone and kernel is None:
                await conversation.forget_kernel(gone)
                raise ToolFailure(kernel_gone_refusal(gone)) from None
            raise
        except NotFound as e:
            if kernel is None:
                raise
            raise ToolFailure(unknown_kernel_refusal(str(e), kernel)) from None
        return await follower.follow(
            ctx, progress, response, deadline=deadline, full_output=full_output, note=startup
        )


@tool
async def wait(
    ctx: Context,
    execution: ExecutionArg = None,
    wait_seconds: WaitSecondsArg = 30,
    until_silent_seconds: Annotated[
        float | None, Field(gt=0, le=3600, description="return early after this much silence")
    ] = None,
    kernel: KernelArg = None,
) -> CellReply:
    """Wait more for a running cell without interrupting it; show its output when it ends."""
    conversation = conversation_of(ctx)
    follower = CellFollower(conversation)
    client, ref = await conversation.kernel_ref(kernel)
    deadline = time.monotonic() + wait_seconds
    async with follower.progress(ctx, client, ref) as progress:
        response = await follower.long_poll(
            progress,
            "current" if execution is None else execution,
            wait=wait_seconds,
            until_silent=until_silent_seconds,
        )
        return await follower.follow(
            ctx, progress, response, deadline=deadline, until_silent=until_silent_seconds
        )


@tool
async def read_output(
    ctx: Context,
    execution: ExecutionArg = None,
    stream: StreamName = "combined",
    lines: LinesArg = None,
    max_chars: Annotated[
        int | None,
        Field(ge=1, description="clip each line to this (a reply never exceeds the budget)"),
    ] = None,
    kernel: KernelArg = None,
) -> Annotated[CallToolResult, ReadResult]:
    """Read lines of a cell's output (any range, with line numbers), e.g. what was omitted."""
    conversation = conversation_of(ctx)
    client, ref = await conversation.kernel_ref(kernel)
    budget = conversation.settings.limits.max_chars  # the reply's, as run_cell's
    clip = min(max_chars or budget, budget)
    response = await client.read(
        ref, "current" if execution is None else execution, stream, lines, clip
    )
    refusal = past_the_end(response)
    if refusal is not None:
        raise ToolFailure(refusal)
    shown = leading(response["lines"], budget)
    model = ReadResult.of(ref, stream, response, shown, read_on(response, shown))
    content = [text_block(render_read(response, shown))]
    return tool_result(content, model, structured=conversation.settings.structured)


@tool
async def search_output(
    query: Annotated[str, Field(min_length=1, description="text or regular expression")],
    ctx: Context,
    execution: Annotated[
        int | Literal["all"] | None,
        Field(description='an execution number, or "all" (default: running, else latest)'),
    ] = None,
    stream: StreamName = "combined",
    mode: Annotated[
        SearchMode,
        Field(
            description='"auto" finds the text as typed, and also regex matches when the query '
            'has regex syntax; "literal" or "regex" for one reading'
        ),
    ] = "auto",
    context: Annotated[int, Field(ge=0, le=100)] = 0,
    ignore_case: bool = False,
    max_matches: Annotated[int, Field(ge=1, le=1000)] = 50,
    kernel: KernelArg = None,
) -> Annotated[CallToolResult, SearchResult]:
    """Find lines in a cell's output, or in all cells' (execution="all"), with context lines."""
    conversation = conversation_of(ctx)
    client, ref = await conversation.kernel_ref(kernel)
    selector = "current" if execution is None else str(execution)
    response = await client.search(
        ref,
        query,
        selector=selector,
        stream=stream,
        mode=mode,
        context=context,
        ignore_case=ignore_case,
        max_matches=max_matches,
    )
    groups = response["groups"]
    scope = search_scope(response["execution"])
    page = SearchPage.within(groups, conversation.settings.limits.max_chars)
    model = SearchResult.of(ref, query, response, page.groups, page.left_out)
    content = [text_block(render_search(response, scope, page))]
    return tool_result(content, model, structured=conversation.settings.structured)


@tool
async def interrupt(
    ctx: Context, kernel: KernelArg = None
) -> Annotated[CallToolResult, CellResult]:
    """Interrupt the running cell (KeyboardInterrupt) and show how it ended."""
    conversation = conversation_of(ctx)
    follower = CellFollower(conversation)
    client, ref = await conversation.kernel_ref(kernel)
    try:
        interrupted = await client.interrupt(ref)
    except Conflict:
        raise ToolFailure(nothing_to_interrupt()) from None
    waited = await client.execution(
        ref, interrupted["number"], wait=INTERRUPT_WAIT, **follower.output_args()
    )
    return await follower.cell_result(
        client, ref, waited["execution"], waited["returned"], full_output=False, note=""
    )


@tool
async def send_input(
    value: Annotated[str, Field(description="the text input() should return")],
    ctx: Context,
    execution: ExecutionArg = None,
    kernel: KernelArg = None,
) -> CellReply:
    """Answer a cell waiting in input() (when the host showed no input dialog)."""
    conversation = conversation_of(ctx)
    follower = CellFollower(conversation)
    client, ref = await conversation.kernel_ref(kernel)
    try:
        sent = await client.send_input(ref, "current" if execution is None else execution, value)
    except Conflict as e:
        number, state = e.details.get("number"), e.details.get("state")
        raise ToolFailure(not_waiting_for_input(number, state)) from None
    deadline = time.monotonic() + INPUT_WAIT
    async with follower.progress(ctx, client, ref) as progress:
        response = await follower.long_poll(progress, sent["number"], wait=INPUT_WAIT)
        return await follower.follow(ctx, progress, response, deadline=deadline)


SaveNotebookArg = Annotated[
    str | None,
    Field(
        description="also save the kernel's cells and outputs as a notebook at this path in the "
        'working directory, e.g. "session.ipynb"'
    ),
]


@tool
async def status(
    ctx: Context,
    execution: ExecutionArg = None,
    kernel: KernelArg = None,
    save_notebook: SaveNotebookArg = None,
) -> Annotated[CallToolResult, StatusResult]:
    """Show the kernel's state, or one execution's lifecycle and output sizes (save_notebook:
    also save the session as an .ipynb)."""
    conversation = conversation_of(ctx)
    structured = conversation.settings.structured
    client, ref = await conversation.kernel_ref(kernel)
    saved = ""
    if save_notebook is not None:
        try:
            path = inside(save_notebook, conversation.settings.cwd)
            notebook = await client.notebook(ref)
            save_notebook_file(path, notebook, within=conversation.settings.cwd)
        except NotebookPathRefused as refused:
            raise ToolFailure(notebook_path_refusal(refused, "model")) from None
        saved = saved_note(notebook, save_notebook) + "\n\n"
    kernel_model = await client.get_kernel(ref)
    info = KernelInfo.of(kernel_model, client.label)
    if execution is None:
        text = saved + render_kernel(kernel_model, gateway=client.label)
        if kernel_model["last_execution"]:
            latest = (await client.execution(ref, "current"))["execution"]
            text += "\n\n" + render_execution_status(latest, kernel_model.get("sandbox"))
        return tool_result([text_block(text)], StatusResult(kernel=info), structured=structured)
    record = (await client.execution(ref, execution))["execution"]
    model = StatusResult.of(info, record)
    content = [text_block(saved + render_execution_status(record, kernel_model.get("sandbox")))]
    return tool_result(content, model, structured=structured)
