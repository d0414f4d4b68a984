"""How many pytest-xdist workers a test command gets: pyproject.toml's `-n auto` means three
(the count the README times, each taking whole test files: `--dist loadfile`), fewer when the
command names fewer test files, and none (this process) for a single file or test."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

WORKERS = 3


def workers_for(args: Sequence[str], directory: Path) -> int:
    """Return the workers for a command whose positional arguments are `args`, relative to
    `directory`: WORKERS unless each names a test file (or a test in one)."""
    files: set[Path] = set()
    for arg in args:
        path = directory / arg.split("::", 1)[0]
        if not path.is_file():
            return WORKERS  # a directory (the testpaths, `tests/gateway`), or pytest says why not
        files.add(path.resolve())
    if not files:
        return WORKERS
    return min(WORKERS, len(files)) if len(files) > 1 else 0
