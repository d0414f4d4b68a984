"""The output schemas the tools publish (tools/list with --output-schemas), pinned: a change to a
result model or to the wire shapes it is built from cannot alter what hosts see without this
test saying so; and what the default tools/list costs a model, pinned to its budget."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import Tool

from loomgate.translator.mcp_server import checkpoint_tools, execution_tools, kernel_tools
from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.apps_hosts import apps_extension
from tests.support.mcp_clients import ERAS

# tools/list with --output-schemas (computed with this test's client; compact since issue 28:
# no titles or null defaults, nullable types as type lists), tool name -> outputSchema, in the
# order a host lists the tools.
PINNED = Path(__file__).parent / "data" / "output_schemas.json"


# What the default tools/list may cost a model: compact JSON, every tool.
TOOLS_LIST_BUDGET = 8_000
TOOL_MODULES = (execution_tools, kernel_tools, checkpoint_tools)


async def listed_tools(era: str, *, apps: bool = False, **options: Any) -> list[Tool]:
    """Return the tools as an in-memory SDK client lists them (no gateway needed), that client
    an MCP Apps host with `apps`."""
    settings = Settings(gateway="http://127.0.0.1:9", autostart=False, cwd="", env={}, **options)
    extensions = [apps_extension()] if apps else []
    async with Client(build_server(settings), mode=era, extensions=extensions) as client:
        return (await client.list_tools()).tools


def listing_size(tools: list[Tool]) -> int:
    """Return what `tools` cost as tools/list sends them (compact JSON)."""
    listing = {
        "tools": [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in tools]
    }
    return len(json.dumps(listing, separators=(",", ":"), ensure_ascii=False))


def model_visible(tool: Tool) -> bool:
    """Return whether a host offers `tool` to the model (MCP Apps' `_meta.ui.visibility`)."""
    visibility = ((tool.meta or {}).get("ui") or {}).get("visibility", ["model", "app"])
    return "model" in visibility


async def published_schemas(era: str) -> dict[str, Any]:
    """Return each tool's outputSchema as listed with --output-schemas."""
    return {tool.name: tool.output_schema for tool in await listed_tools(era, output_schemas=True)}


def tool_functions() -> set[str]:
    """Return the names of the tool functions the tool modules define (each wrapped by @tool)."""
    return {
        name
        for module in TOOL_MODULES
        for name, value in vars(module).items()
        if inspect.iscoroutinefunction(value)
        and getattr(value, "__wrapped__", None) is not None
        and value.__module__ == module.__name__
    }


@pytest.mark.parametrize("era", ERAS)
async def test_the_default_tool_list_keeps_to_its_budget_with_every_tool(era: str) -> None:
    tools = await listed_tools(era)
    assert {tool.name for tool in tools} == tool_functions()
    assert len(tools) == 13
    size = listing_size(tools)
    assert size <= TOOLS_LIST_BUDGET, size
    for tool in tools:
        assert tool.output_schema is None, tool.name  # --output-schemas lists them
        description = tool.description or ""
        assert len(description) >= 60, tool.name  # says what it does, not just its name
        assert "\n " not in description and not description.endswith(("\n", " ")), tool.name
        assert "title" not in json.dumps(tool.input_schema), tool.name
        for name, argument in tool.input_schema["properties"].items():
            assert "type" in argument or "anyOf" in argument, (tool.name, name)


@pytest.mark.parametrize("era", ERAS)
async def test_an_apps_host_offers_the_model_the_same_tools_within_the_budget(era: str) -> None:
    tools = await listed_tools(era, apps=True)
    offered = [tool for tool in tools if model_visible(tool)]
    assert [tool.name for tool in offered] == [tool.name for tool in await listed_tools(era)]
    assert len(tools) > len(offered)  # the view's own tools, which the model is not offered
    assert listing_size(offered) <= TOOLS_LIST_BUDGET, listing_size(offered)


@pytest.mark.parametrize("era", ERAS)
async def test_run_cell_and_wait_advertise_one_name_for_how_long_they_wait(era: str) -> None:
    tools = {tool.name: tool for tool in await listed_tools(era, output_schemas=True)}
    for name, default in [("run_cell", 10), ("wait", 30)]:
        argument = tools[name].input_schema["properties"]["wait_seconds"]
        assert (argument["type"], argument["default"]) == ("number", default), name
    listing = [tool.model_dump(by_alias=True, mode="json") for tool in tools.values()]
    assert "timeout_seconds" not in json.dumps(listing)  # its earlier name, taken unadvertised


@pytest.mark.parametrize("era", ERAS)
async def test_the_output_schemas_are_the_pinned_ones(era: str) -> None:
    pinned = json.loads(PINNED.read_text())
    published = await published_schemas(era)
    assert list(published) == list(pinned)  # the tools, in their order
    changed = [name for name in pinned if published[name] != pinned[name]]
    assert not changed, (
        f"the output schemas of {changed} changed; if that is meant, it is a public change: "
        f"write it to {PINNED.name} and say so in docs"
    )
