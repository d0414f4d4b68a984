"""loomgate.translator: the per-conversation MCP server over a loomgate gateway."""

from __future__ import annotations

__version__ = "0.1.0"
