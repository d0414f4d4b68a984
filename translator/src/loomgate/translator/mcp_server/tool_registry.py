"""How a tool is declared: one function whose signature, docstring and body are the whole tool.

`@tool` turns every failure into one sentence for the model (never a traceback), and lets a tool
that asked the host for input continue when the host calls it again with the answer.
`register_tools` hands the functions to the SDK as they are: their signatures become the input
schemas, their `Annotated[CallToolResult, Model]` returns the output schemas.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, ParamSpec

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import Field

from loomgate.translator.client.errors import Forbidden, GatewayConfigError, GatewayError
from loomgate.translator.mcp_server.cell_follower import CellFollower
from loomgate.translator.mcp_server.conversation import Conversation, NothingRunYet
from loomgate.translator.mcp_server.input_dialogs import NeedsInput
from loomgate.translator.mcp_server.results import failure
from loomgate.translator.presentation import closed_to_agents_refusal, unexpected_failure

log = logging.getLogger("loomgate.translator")

P = ParamSpec("P")
# What a tool answers: its result, or (cell tools) the host's cue to ask the person for input.
ToolReply = CallToolResult | InputRequiredResult

# The arguments most tools share.
KernelArg = Annotated[
    str | None, Field(description="kernel name or id prefix (default: this conversation's)")
]
ExecutionArg = Annotated[
    int | None, Field(description="execution number N of In [N] (default: running, else latest)")
]


class ToolFailure(Exception):
    """A tool failure to report to the model as one sentence (isError)."""


def conversation_of(ctx: Context) -> Conversation:
    """Return the conversation this call belongs to (the server lifespan's context)."""
    # A bare `Context` types it as the SDK's default (a dict); the server's lifespan yields one.
    conversation: object = ctx.request_context.lifespan_context
    assert isinstance(conversation, Conversation)
    return conversation


def context_of(kwargs: Mapping[str, object]) -> Context:
    """Return the context the SDK passes a tool (its `ctx` keyword argument)."""
    ctx = kwargs["ctx"]
    assert isinstance(ctx, Context)
    return ctx


def tool(fn: Callable[P, Awaitable[ToolReply]]) -> Callable[P, Awaitable[ToolReply]]:
    """Return the tool `fn`, failing in one sentence and resuming after an input dialog."""

    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(fn).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }

    @functools.wraps(fn)
    async def call(*args: P.args, **kwargs: P.kwargs) -> ToolReply:
        started = time.time()
        result = await answer(*args, **kwargs)
        ctx = context_of(kwargs)
        conversation = conversation_of(ctx)
        reports = conversation.reports
        if reports.client_name is None:
            reports.client_name = host_name(ctx)
        kernel_id = conversation.kernel["id"] if conversation.kernel else None
        given = {
            k: v
            for k, v in kwargs.items()
            if k != "ctx" and (k not in defaults or v != defaults[k])
        }
        reports.report(conversation.client, fn.__name__, given, result, started, kernel_id)
        return result

    async def answer(*args: P.args, **kwargs: P.kwargs) -> ToolReply:
        ctx = context_of(kwargs)
        try:
            if ctx.request_state:  # the host answered an input dialog this tool asked for
                return await CellFollower(conversation_of(ctx)).resume(ctx)
            try:
                return await fn(*args, **kwargs)
            except GatewayError as e:
                if not await conversation_of(ctx).revive(e):
                    raise
            return await fn(*args, **kwargs)  # once more, on the revived gateway
        except NeedsInput as needs:
            return needs.result
        except Forbidden as e:
            closed = e.details.get("open_to_agents") is False
            return failure(closed_to_agents_refusal(e.details) if closed else str(e))
        except (ToolFailure, GatewayError, GatewayConfigError, NothingRunYet) as e:
            return failure(str(e))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.exception("tool failed")
            return failure(unexpected_failure(e))

    return call


def host_name(ctx: Context) -> str:
    """Return the MCP host's name as its initialize request gave it ("" if it gave none)."""
    params = ctx.session.client_params
    return params.client_info.name if params is not None else ""


def register_tools(
    server: MCPServer[Any], tools: Sequence[Callable[..., Awaitable[Any]]], *, schemas: bool
) -> None:
    """Register `tools` in order, each described by its docstring; with `schemas` each also
    gets its output schema (its structuredContent is sent either way in structured mode)."""
    for fn in tools:
        server.add_tool(
            fn, description=description(fn), structured_output=None if schemas else False
        )


def description(fn: Callable[..., Any]) -> str:
    """Return a tool's description: its docstring, each paragraph on one line."""
    paragraphs = inspect.cleandoc(fn.__doc__ or "").split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return a JSON Schema as tools/list sends it: without pydantic's titles and `null`
    defaults, and a nullable type as a list of types (`["string", "null"]`, not an anyOf)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            out[key] = {name: compact_schema(sub) for name, sub in value.items()}
        elif isinstance(value, dict):
            out[key] = compact_schema(value)
        elif isinstance(value, list):
            out[key] = [compact_schema(v) if isinstance(v, dict) else v for v in value]
        else:
            out[key] = value
    choices = out.get("anyOf")
    if isinstance(choices, list) and len(choices) == 2 and {"type": "null"} in choices:
        [other] = [choice for choice in choices if choice != {"type": "null"}]
        if isinstance(other.get("type"), str) and not other.keys() & out.keys():
            del out["anyOf"]
            out.update(other, type=[other["type"], "null"])
    return out
