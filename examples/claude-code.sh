#!/usr/bin/env sh
# Register loomgate with Claude Code (stdio). The kernel starts in the directory Claude Code runs in.
claude mcp add loomgate -- loomgate-mcp

# A named remote gateway from ~/.config/loomgate/gateways.toml:
# claude mcp add loomgate-lab -- loomgate-mcp --gateway lab
