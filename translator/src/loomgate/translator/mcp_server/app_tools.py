"""The app-only tools (`_meta.ui.visibility: ["app"]`) through which the execution view reads
an execution and acts on it for the person: never offered to the model.

They take the model's argument rules (a kernel name or id prefix on this conversation's
gateway, an execution number; no token, no path). Their calls are not reported to the monitor:
they are the view polling, and an answer to input() may be a password.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, ParamSpec

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from loomgate.translator.client.errors import Conflict, GatewayConfigError, GatewayError
from loomgate.translator.mcp_server.conversation import NothingRunYet
from loomgate.translator.mcp_server.execution_tools import INTERRUPT_WAIT, LinesArg
from loomgate.translator.mcp_server.results import failure, text_block
from loomgate.translator.mcp_server.tool_registry import (
    ExecutionArg,
    KernelArg,
    ToolFailure,
    conversation_of,
)
from loomgate.translator.presentation import (
    not_waiting_for_input,
    unexpected_failure,
)
from loomgate.translator.presentation.apps import not_running_refusal, view_summary

log = logging.getLogger("loomgate.translator")

P = ParamSpec("P")

HEAD, TAIL = 20, 40  # view_execution's lines shown inline, by default (the view's too)
PAGE_CHARS = 5000  # each line the view is given, clipped to this
LinesShown = Annotated[int, Field(ge=0, le=1000, description="lines shown from this end")]


def app_tool(
    fn: Callable[P, Awaitable[CallToolResult]],
) -> Callable[P, Awaitable[CallToolResult]]:
    """Return the app tool `fn`, failing in one sentence (never a traceback)."""

    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except (ToolFailure, GatewayError, GatewayConfigError, NothingRunYet) as e:
            return failure(str(e))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("app tool failed")
            return failure(unexpected_failure(e))

    return call


def data_result(number: int, state: str, data: Any) -> CallToolResult:
    """Return an app tool's result: one line of text and the data as structuredContent."""
    return CallToolResult(
        content=[text_block(view_summary(number, state))], structured_content=data
    )


@app_tool
async def view_execution(
    ctx: Context,
    execution: ExecutionArg = None,
    head: LinesShown = HEAD,
    tail: LinesShown = TAIL,
    kernel: KernelArg = None,
) -> CallToolResult:
    """The execution view's data: one execution's summary, its first and last output lines and
    where its rich outputs sit."""
    client, ref = await conversation_of(ctx).kernel_ref(kernel)
    selector = "current" if execution is None else execution
    reply = await client.execution(ref, selector, head=head, tail=tail, max_chars=PAGE_CHARS)
    record = reply["execution"]
    return data_result(record["number"], record["state"], {"execution": record})


@app_tool
async def view_output(
    ctx: Context, execution: int, lines: LinesArg = None, kernel: KernelArg = None
) -> CallToolResult:
    """A page of an execution's combined output for the execution view."""
    client, ref = await conversation_of(ctx).kernel_ref(kernel)
    read = await client.read(ref, execution, "combined", lines, PAGE_CHARS)
    return data_result(read["number"], read["state"], dict(read))


@app_tool
async def view_rich(
    ctx: Context,
    execution: int,
    index: Annotated[int, Field(ge=0)],
    kernel: KernelArg = None,
) -> CallToolResult:
    """One rich output (an image, an HTML table) of an execution for the execution view."""
    client, ref = await conversation_of(ctx).kernel_ref(kernel)
    bundle = await client.rich(ref, execution, index)
    return data_result(bundle["number"], "rich", dict(bundle))


@app_tool
async def view_traceback(ctx: Context, execution: int, kernel: KernelArg = None) -> CallToolResult:
    """An execution's traceback with the kernel's ANSI colours, for the execution view."""
    client, ref = await conversation_of(ctx).kernel_ref(kernel)
    coloured = await client.traceback(ref, execution)
    return data_result(coloured["number"], "error", dict(coloured))


@app_tool
async def view_interrupt(ctx: Context, execution: int, kernel: KernelArg = None) -> CallToolResult:
    """Interrupt In [execution] for the person (only while that execution runs)."""
    client, ref = await conversation_of(ctx).kernel_ref(kernel)
    try:
        # The gateway checks that it is this execution that runs, with the interrupt: one
        # that ended meanwhile never costs the next cell its run.
        await client.interrupt(ref, execution)
    except Conflict as e:
        raise ToolFailure(not_running_refusal(execution, e.details.get("state"))) from None
    ended = (await client.execution(ref, execution, wait=INTERRUPT_WAIT))["execution"]
    return data_result(ended["number"], ended["state"], {"execution": ended})


@app_tool
async def view_send_input(
    ctx: Context,
    value: Annotated[str, Field(description="the text input() should return")],
    execution: int,
    kernel: KernelArg = None,
) -> CallToolResult:
    """Answer In [execution]'s input() for the person (the answer is not echoed back)."""
    client, ref = await conversation_of(ctx).kernel_ref(kernel)
    try:
        after = await client.send_input(ref, execution, value)
    except Conflict as e:
        number, state = e.details.get("number"), e.details.get("state")
        raise ToolFailure(not_waiting_for_input(number, state)) from None
    return data_result(after["number"], after["state"], {"execution": after})


# The order the view's host lists them in.
APP_TOOLS = (
    view_execution,
    view_output,
    view_rich,
    view_traceback,
    view_interrupt,
    view_send_input,
)
