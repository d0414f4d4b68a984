"""Start-up as an installed loomgate has it: Python's bytecode cache in use, for every side."""

from __future__ import annotations

import compileall
import os
import sysconfig
from pathlib import Path

import loomgate.gateway
import loomgate.shared
import loomgate.translator


def as_installed(*more: Path) -> None:
    """Let this process and all it spawns cache bytecode; compile loomgate, the packages of
    this environment and `more` (another environment's, say) now.

    An installed package has its bytecode compiled (by pip at install, or by Python on first
    import). A PYTHONDONTWRITEBYTECODE in the environment (this machine sets it) would make
    every spawn of loomgate compile its own sources again, while the floors spawned through
    the MCP SDK, which passes servers a minimal environment, keep their cache: a start-up
    comparison would charge loomgate alone for compiling.
    """
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    ours = [
        Path(p)
        for m in (loomgate.gateway, loomgate.shared, loomgate.translator)
        for p in m.__path__
    ]
    for directory in [*ours, Path(sysconfig.get_paths()["purelib"]), *more]:
        compileall.compile_dir(directory, quiet=1, workers=0)
