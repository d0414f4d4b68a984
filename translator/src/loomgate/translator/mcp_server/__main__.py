"""`python -m loomgate.translator.mcp_server`: the same as `loomgate-mcp`."""

from __future__ import annotations

import sys

from loomgate.translator.mcp_server.main import main

sys.exit(main())
