"""What a fresh Python process imports, read from `-X importtime`."""

from __future__ import annotations

import subprocess
import sys


def imported_modules(*args: str) -> set[str]:
    """Return the modules a fresh `python -X importtime *args` process imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    rows = [line.split("|")[-1] for line in done.stderr.splitlines() if "import time:" in line]
    return {row.strip() for row in rows[1:]}  # the first row is the header
