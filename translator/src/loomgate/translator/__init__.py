"""loomgate.translator: the per-conversation MCP server over a loomgate gateway."""
