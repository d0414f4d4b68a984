"""`loomgate-mcp`: the MCP server a host starts per conversation, on stdio or Streamable HTTP."""
