"""A do-nothing MCP server over stdio: the MCP SDK's own cost, a floor for the translator bench."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

server: MCPServer[None] = MCPServer("noop")


@server.tool(structured_output=False)
async def run_cell(code: str) -> CallToolResult:
    """Return the code unchanged (no kernel involved)."""
    return CallToolResult(content=[TextContent(type="text", text=code)])


if __name__ == "__main__":
    server.run("stdio")
