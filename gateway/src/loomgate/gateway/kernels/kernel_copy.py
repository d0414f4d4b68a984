"""A kernel's state copied by fork(): the cells that make a copy of a live ipykernel run under
kernels/copy_launcher.py, and the copy's connection file.

`fork_cell` makes a live copy now; `checkpoint_cell` makes a frozen one (a child that stops
itself, costing memory only where the kernel's state later differs) that makes a live copy each
time it is continued (SIGCONT) with an order file naming the connection file, then freezes
again. Each cell's value is the child's pid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jupyter_core.paths import secure_write

from loomgate.gateway.kernels import copy_launcher

LAUNCHER = Path(copy_launcher.__file__)
BECOME = copy_launcher.BECOME

FORK = """\
import os as _os, sys as _sys, asyncio as _asyncio
_loomgate_pid = _os.fork()
if _loomgate_pid == 0:
    setattr(_sys, {become!r}, {connection_file!r})
    _asyncio.get_event_loop().stop()
"""
CHECKPOINT = """\
import os as _os, sys as _sys, signal as _signal, asyncio as _asyncio
_loomgate_pid = _os.fork()
if _loomgate_pid == 0:
    while True:
        _os.kill(_os.getpid(), _signal.SIGSTOP)
        if _os.fork() == 0:
            with open({order!r}) as _order:
                setattr(_sys, {become!r}, _order.read())
            _asyncio.get_event_loop().stop()
            break
"""
PID = "_loomgate_pid"  # the user expression whose value is the child's pid


def fork_cell(connection_file: Path) -> str:
    """Return the code that forks the kernel into a live copy on `connection_file`."""
    return FORK.format(become=BECOME, connection_file=str(connection_file))


def checkpoint_cell(order: Path) -> str:
    """Return the code that forks the kernel into a frozen copy: continued, it reads the
    connection file named in `order` and forks a live copy on it."""
    return CHECKPOINT.format(become=BECOME, order=str(order))


def copy_connection(origin: dict[str, Any], ipc_prefix: Path) -> dict[str, Any]:
    """Return the connection info of a copy of the kernel connected by `origin` (ipc): the same
    key and signature scheme, its sockets at `ipc_prefix`-N."""
    if origin.get("transport") != "ipc":
        raise ValueError("only a kernel reached over ipc can be copied")
    return {**origin, "ip": str(ipc_prefix)}


def write_connection(info: dict[str, Any], path: Path) -> None:
    """Write a copy's connection file, readable by its owner alone."""
    with secure_write(str(path)) as f:
        json.dump(info, f)
