"""A do-nothing MCP server over stdio: the MCP SDK's own cost, a floor for the translator bench.

With `--relay URL TOKEN` its tool also makes one request to the echo server at URL (through
loomgate's own HTTP client): the floor of any design that puts a second process behind the MCP
server, as loomgate's gateway is.

With `--websocket URL KERNEL_ID` (the token in $NOOP_WEBSOCKET_TOKEN) its tool runs the code over
that Jupyter kernel's websocket and returns the reply's status: the least an MCP server that
reaches a notebook's kernel through Jupyter Server can do (no record, no output kept).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

if TYPE_CHECKING:
    from tests.support.kernel_ws import KernelWebsocket

server: MCPServer[None] = MCPServer("noop")
relay = None
if sys.argv[1:2] == ["--relay"]:
    from loomgate.translator.client.session import GatewaySession

    relay = GatewaySession(sys.argv[2], sys.argv[3], local=True)
websocket: KernelWebsocket | None = None
if sys.argv[1:2] == ["--websocket"]:
    from tests.support.kernel_ws import KernelWebsocket

    websocket = KernelWebsocket(
        sys.argv[2], os.environ["NOOP_WEBSOCKET_TOKEN"], sys.argv[3], binary=True
    )


@server.tool(structured_output=False)
async def run_cell(code: str) -> CallToolResult:
    """Return the code (echoed by the relay's server, if any), or the status of running it over
    the kernel's websocket."""
    if relay is not None:
        code = (await relay.request("POST", "echo", body={"code": code}))["code"]
    if websocket is not None:
        if websocket.ws is None:
            await websocket.__aenter__()  # the connection lives as long as the server
        reply, _ = await websocket.run(code)
        code = reply["content"]["status"]
    return CallToolResult(content=[TextContent(type="text", text=code)])


@server.tool(structured_output=False)
async def hang_up() -> CallToolResult:
    """Close the kernel's websocket (the next run_cell opens it again)."""
    if websocket is not None and websocket.ws is not None:
        await websocket.__aexit__()
        websocket.ws = None
    return CallToolResult(content=[TextContent(type="text", text="closed")])


if __name__ == "__main__":
    server.run("stdio")
