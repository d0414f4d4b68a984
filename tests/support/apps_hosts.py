"""MCP Apps hosts for tests: the client extension an Apps host advertises."""

from __future__ import annotations

from mcp.client.extension import ClientExtension, advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID


def apps_extension() -> ClientExtension:
    """Return what an MCP Apps host (Claude Desktop, VS Code, …) advertises at connection."""
    return advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})
