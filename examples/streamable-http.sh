#!/usr/bin/env sh
# Serve the MCP tools over Streamable HTTP on loopback, at http://127.0.0.1:8801/mcp. Every
# request needs "Authorization: Bearer <token>": the token is kept in the state dir's mcp_token
# (mode 0600; --token-env NAME reads yours from a variable), and the start line names it with
# the registration, for example:
#   claude mcp add --transport http loomgate http://127.0.0.1:8801/mcp \
#       --header "Authorization: Bearer $(cat ~/.local/state/loomgate/mcp_token)"
loomgate-mcp --transport streamable-http --host 127.0.0.1 --port 8801 --path /mcp
