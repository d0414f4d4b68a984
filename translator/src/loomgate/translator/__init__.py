"""loomgate.translator: the MCP server and the CLI, over one client of loomgate gateways."""

from __future__ import annotations

__version__ = "0.1.0"
