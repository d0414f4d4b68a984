"""What a reliability test records about itself: its scenario, what it checked, its figures.

`LOOMGATE_RELIABILITY_SCALE` multiplies the counts (bench/stress.py runs longer versions).
"""

from __future__ import annotations

import os
from collections.abc import Callable

SCALE = float(os.environ.get("LOOMGATE_RELIABILITY_SCALE", "1"))

Figure = Callable[..., None]


def scaled(count: int) -> int:
    """Return `count` multiplied by the suite's scale (at least 1)."""
    return max(1, round(count * SCALE))
