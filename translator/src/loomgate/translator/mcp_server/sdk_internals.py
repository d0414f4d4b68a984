"""The private parts of the `mcp` SDK that loomgate relies on, each with why.

Every use of a private SDK name goes through this module, and
tests/translator/mcp_server/test_sdk_internals.py fails loudly when an upgrade removes one.
"""

from __future__ import annotations

from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer

# (attribute of MCPServer, why no public one will do)
PRIVATE_USES: tuple[tuple[str, str], ...] = (
    (
        "_lowlevel_server",
        "the SDK runs an MCPServer on streams of the caller's own (loomgate's thread-free stdio) "
        "only through its low-level server; its in-memory client reaches it the same way, and "
        "making it public is an open TODO in the SDK",
    ),
)


def lowlevel_server(server: MCPServer[Any]) -> Server[Any]:
    """Return the low-level server behind `server`, which can run on any pair of streams."""
    lowlevel: Server[Any] = server._lowlevel_server
    return lowlevel
