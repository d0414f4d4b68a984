"""What in a writable dir the person's own tools run later without it showing in review: virtual
environments (a `.pth` runs at the next `python`), `node_modules` and Python's bytecode caches
(a `.pyc` runs at the next import, with `git diff` empty). Found when a kernel starts, to a depth
and a count of dirs; each is kept read-only, and each dir holding Python source without a
bytecode cache gets one, read-only too, before it exists."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MAX_DEPTH", "MAX_DIRS", "NODE_MODULES", "PYCACHE", "HostCode", "host_code"]

PYCACHE = "__pycache__"
NODE_MODULES = "node_modules"
VENV_MARK = "pyvenv.cfg"  # what makes a dir a virtual environment, whatever its name
MAX_DEPTH = 4  # dirs below a writable dir that are looked at (the writable dir is depth 0)
MAX_DIRS = 5000  # dirs of one writable dir looked at, at most
SKIPPED = frozenset({".git"})  # guarded whole on its own


@dataclass
class HostCode:
    """What of one writable dir stays read-only (`kept`), the bytecode caches made for it
    (`made`), and whether the walk stopped at MAX_DIRS (`cut`)."""

    kept: list[Path] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)
    cut: bool = False


def host_code(top: Path) -> HostCode:
    """Return what of the writable dir `top` the person's tools run later (HostCode)."""
    found = HostCode()
    queue: list[tuple[Path, int]] = [(top, 0)]
    seen = 0
    while queue:
        directory, depth = queue.pop(0)
        seen += 1
        if seen > MAX_DIRS:
            found.cut = True
            break
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        names = {entry.name for entry in entries}
        if directory != top and VENV_MARK in names:
            found.kept.append(directory)
            continue
        if any(name.endswith(".py") for name in names) and PYCACHE not in names:
            found.made.append(directory / PYCACHE)
        for entry in sorted(entries, key=lambda e: e.name):
            if not entry.is_dir(follow_symlinks=False) or entry.name in SKIPPED:
                continue
            path = Path(entry.path)
            if entry.name in (PYCACHE, NODE_MODULES):
                found.kept.append(path)
            elif depth < MAX_DEPTH:
                queue.append((path, depth + 1))
    return found
