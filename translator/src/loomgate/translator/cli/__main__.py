"""`python -m loomgate.translator.cli`: the same as `loomgate`."""

from __future__ import annotations

import sys

from loomgate.translator.cli.main import main

sys.exit(main())
