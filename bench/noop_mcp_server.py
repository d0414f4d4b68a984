"""A do-nothing MCP server over stdio: the MCP SDK's own cost, a floor for the translator bench.

With `--relay URL TOKEN` its tool also makes one request to the echo server at URL (through
loomgate's own HTTP client): the floor of any design that puts a second process behind the MCP
server, as loomgate's gateway is.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

server: MCPServer[None] = MCPServer("noop")
relay = None
if sys.argv[1:2] == ["--relay"]:
    from loomgate.translator.client.http_session import GatewayHttp

    relay = GatewayHttp(sys.argv[2], sys.argv[3], local=True)


@server.tool(structured_output=False)
async def run_cell(code: str) -> CallToolResult:
    """Return the code unchanged (no kernel involved), echoed by the relay's server if any."""
    if relay is not None:
        code = (await relay.request("POST", "echo", body={"code": code}))["code"]
    return CallToolResult(content=[TextContent(type="text", text=code)])


if __name__ == "__main__":
    server.run("stdio")
