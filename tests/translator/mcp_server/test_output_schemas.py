"""The output schemas the tools publish (tools/list), pinned: a change to a result model or to the
wire shapes it is built from cannot alter what hosts see without this test saying so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.mcp_clients import ERAS

# tools/list as loomgate 0.x published it (computed with this test's client at b7c750d),
# tool name -> outputSchema, in the order a host lists the tools.
PINNED = Path(__file__).parent / "data" / "output_schemas.json"


async def published_schemas(era: str) -> dict[str, Any]:
    """Return each tool's outputSchema as an in-memory SDK client lists it (no gateway needed)."""
    settings = Settings(gateway="http://127.0.0.1:9", autostart=False, cwd="", env={})
    async with Client(build_server(settings), mode=era) as client:
        listed = await client.list_tools()
    return {tool.name: tool.output_schema for tool in listed.tools}


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
