#!/usr/bin/env sh
# Register loomgate with Claude Code (stdio), once `uv tool install <clone>` has put loomgate-mcp
# on PATH. Claude Code starts it in your project, where the conversation's kernel then runs;
# add `--cwd DIR` after loomgate-mcp to choose another directory.
claude mcp add loomgate -- loomgate-mcp

# A named remote gateway from ~/.config/loomgate/gateways.toml:
# claude mcp add loomgate-lab -- loomgate-mcp --gateway lab
