#!/usr/bin/env sh
# Serve the MCP tools over Streamable HTTP on loopback; point an MCP client at
# http://127.0.0.1:8801/mcp (for example MCP Inspector, or mcp's Client("http://127.0.0.1:8801/mcp")).
loomgate-mcp --transport streamable-http --host 127.0.0.1 --port 8801 --path /mcp
