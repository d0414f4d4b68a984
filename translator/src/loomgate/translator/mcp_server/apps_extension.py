"""MCP Apps (`io.modelcontextprotocol/ui`) for the clients that negotiate it, and nothing of it
for the others: the SDK's `Apps` extension carries the view's resource and its app-only tools;
the listings are trimmed per client (SEP-2133: degrade gracefully).

With Apps, run_cell, wait and read_output name the view (`_meta.ui.resourceUri`) in tools/list
and name their execution (kernel and number, nothing more) in each result's `_meta`; the view
reads it through the app-only tools. Without it, tools/list, resources/list and every result are
what they are without this extension, and the app-only tools are refused.
"""

from __future__ import annotations

from typing import Any

from mcp.server.apps import APP_MIME_TYPE, Apps, client_supports_apps
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.resources import FunctionResource
from mcp.types import CallToolRequestParams, CallToolResult

from loomgate.shared import wire
from loomgate.translator.mcp_server.app_document import document
from loomgate.translator.mcp_server.app_tools import APP_TOOLS
from loomgate.translator.mcp_server.cell_follower import RESULT_EXECUTIONS
from loomgate.translator.mcp_server.results import failure
from loomgate.translator.mcp_server.tool_registry import description
from loomgate.translator.presentation.apps import app_only_refusal

EXECUTION_VIEW = "ui://loomgate/execution"
VIEWED_TOOLS = frozenset({"run_cell", "wait", "read_output"})
APP_TOOL_NAMES = frozenset(fn.__name__ for fn in APP_TOOLS)
# The key of a viewed tool's result `_meta` that names its execution for the view.
RESULT_META = "loomgate/execution"


class ExecutionViewApps(Apps):
    """The Apps extension with loomgate's execution view and its app-only tools."""

    def __init__(self) -> None:
        super().__init__()
        for fn in APP_TOOLS:
            bind = self.tool(
                resource_uri=EXECUTION_VIEW,
                visibility=["app"],
                name=fn.__name__,
                description=description(fn),
                structured_output=False,
            )
            bind(fn)
        view = FunctionResource(
            uri=EXECUTION_VIEW,
            name="loomgate execution",
            title="loomgate: a cell's execution",
            description="A cell's code, state and output, live, with interrupt and input.",
            mime_type=APP_MIME_TYPE,
            fn=document,
        )
        self.add_resource(view)

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        """Refuse an app-only tool to a client without Apps; with Apps, name the execution a
        viewed tool's result shows."""
        apps = client_supports_apps(ctx)
        if params.name in APP_TOOL_NAMES and not apps:
            return failure(app_only_refusal(params.name))
        if not apps or params.name not in VIEWED_TOOLS:
            return await call_next(ctx)
        made: list[wire.Execution] = []
        collecting = RESULT_EXECUTIONS.set(made)
        try:
            result = await call_next(ctx)
        finally:
            RESULT_EXECUTIONS.reset(collecting)
        if not isinstance(result, CallToolResult):
            return result
        named = shown_execution(result, params.arguments or {}, made[-1] if made else None)
        if not named:
            return result
        return result.model_copy(update={"meta": {**(result.meta or {}), RESULT_META: named}})


def shown_execution(
    result: CallToolResult, arguments: dict[str, Any], made: wire.Execution | None
) -> dict[str, Any]:
    """Return the kernel and execution a viewed tool's result shows: the execution the result
    was made of, else its structured content, else (content mode) what its arguments named,
    the view taking the rest as the running or latest."""
    if made is not None:
        return {"kernel": made["kernel_id"], "execution": made["number"]}
    data = result.structured_content or {}
    named = {
        "kernel": data.get("kernel", arguments.get("kernel")),
        "execution": data.get("execution", arguments.get("execution")),
    }
    return {key: value for key, value in named.items() if value is not None}


async def apps_listing(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """Return tools/list and resources/list as this client may see them: with Apps, the viewed
    tools name the view; without, no app-only tool and no `ui://` resource."""
    result = await call_next(ctx)
    if ctx.method not in ("tools/list", "resources/list") or not isinstance(result, dict):
        return result
    apps = client_supports_apps(ctx)
    if ctx.method == "resources/list":
        if apps:
            return result
        kept = [r for r in result.get("resources", []) if not str(r.get("uri")).startswith("ui://")]
        return {**result, "resources": kept}
    model_tools, app_tools = [], []
    for tool in result.get("tools", []):
        visibility = ((tool.get("_meta") or {}).get("ui") or {}).get("visibility")
        if visibility is not None and "model" not in visibility:
            app_tools.append(tool)
        elif apps and tool.get("name") in VIEWED_TOOLS:
            meta = dict(tool.get("_meta") or {})
            meta["ui"] = {"resourceUri": EXECUTION_VIEW}
            model_tools.append({**tool, "_meta": meta})
        else:
            model_tools.append(tool)
    return {**result, "tools": model_tools + app_tools if apps else model_tools}
