"""Fixtures shared by the output-log and search tests: a large pre-built log."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from loomgate.gateway.records.output_log import LineLog

BIG_LINES = 1_000_000


def _big_line(index: int) -> str:
    """Return the text of 0-based line `index` of the big log."""
    return f"line {index:07d} of the big log"


@pytest.fixture(scope="session")
def big_line() -> Callable[[int], str]:
    """Return the function giving the text of each 0-based line of `big_log`."""
    return _big_line


@pytest.fixture(scope="session")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> LineLog:
    """Return a committed log of 1,000,000 `big_line` lines (tag 1), built in 100 appends."""
    log = LineLog(Path(tmp_path_factory.mktemp("big")) / "big")
    batch = BIG_LINES // 100
    for start in range(0, BIG_LINES, batch):
        log.append([_big_line(i) for i in range(start, start + batch)], tag=1)
    return log
