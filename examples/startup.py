# ~/.config/loomgate/startup.py: runs in every kernel loomgate-mcp creates, and again after reset.
# It is sent as source, so it works on remote kernels too; __file__ is this file's path.
import numpy as np  # an example: whatever every session should have

print(f"startup from {__file__}: numpy {np.__version__}")
