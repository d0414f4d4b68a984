"""A kernel's state copied by fork(): the cells that make a copy of a live ipykernel run under
residency/copy_launcher.py, and the copy's connection file.

`fork_cell` makes a live copy now; `checkpoint_cell` makes a frozen one (a child that stops
itself, costing memory only where the kernel's state later differs) that makes a live copy each
time it is continued (SIGCONT) with an order file naming the connection file, then freezes
again; `starter_cell` spawns (posix_spawn: no copy of the kernel's memory, whatever its size)
a frozen starter (residency/copy_starter.py) that, continued so, starts a fresh kernel on it
(the command and environment the kernel started with). Each cell's value is the child's pid, as
the kernel's own pid namespace numbers it. Each forked child takes a session of its own at once
(the end of its origin's process group, jupyter_client's way to end a kernel, is not its), and
frozen ones ignore interrupts (they are their kernel's). A copying cell's code ends the cell:
its copies run on from there, as a new kernel, so what goes with it comes before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jupyter_core.paths import secure_write

from loomgate.gateway.residency import copy_launcher, copy_starter

BECOME = copy_launcher.BECOME
LAUNCH = copy_launcher.LAUNCH
STARTER_PROGRAM = Path(copy_starter.__file__)
# A forked child's first act: its stdout and stderr the kernel's log again (copy_launcher.OUTPUT).
OWN_OUTPUT = f"[_os.dup2(_fd, _n) for _n, _fd in enumerate(_sys.{copy_launcher.OUTPUT}, 1)]"

FORK = """\
import os as _os, sys as _sys, asyncio as _asyncio
_loomgate_pid = _os.fork()
if _loomgate_pid == 0:
    {own_output}
    _os.setsid()
    setattr(_sys, {become!r}, {connection_file!r})
    _asyncio.get_event_loop().stop()
"""
CHECKPOINT = """\
import os as _os, sys as _sys, signal as _signal, asyncio as _asyncio
_loomgate_pid = _os.fork()
if _loomgate_pid == 0:
    {own_output}
    _os.setsid()
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    while True:
        _os.kill(_os.getpid(), _signal.SIGSTOP)
        if _os.fork() == 0:
            _os.setsid()
            with open({order!r}) as _order:
                setattr(_sys, {become!r}, _order.read())
            _asyncio.get_event_loop().stop()
            break
"""
STARTER = """\
import os as _os, sys as _sys
_argv, _env = getattr(_sys, {launch!r})
_out = getattr(_sys, {output!r})
_named = _argv[_argv.index("-f") + 1]  # its connection file, as it started
{pid} = _os.posix_spawn(
    _argv[0],
    [_argv[0], "-I", "-S", {starter!r}, {order!r}, _named, *_argv],
    _env,
    setsid=True,
    file_actions=[(_os.POSIX_SPAWN_DUP2, _out[0], 1), (_os.POSIX_SPAWN_DUP2, _out[1], 2)],
)
"""
PID = "_loomgate_pid"  # the user expression whose value is the child's pid
STARTER_PID = "_loomgate_starter_pid"  # a starter's, spawned in the same cell as a checkpoint
CUDA = "loomgate: the kernel holds a CUDA context"  # the error a copying cell raises then


def fork_cell(connection_file: Path) -> str:
    """Return the code that forks the kernel into a live copy on `connection_file`."""
    return FORK.format(become=BECOME, connection_file=str(connection_file), own_output=OWN_OUTPUT)


def checkpoint_cell(order: Path) -> str:
    """Return the code that forks the kernel into a frozen copy: continued, it reads the
    connection file named in `order` and forks a live copy on it."""
    return CHECKPOINT.format(become=BECOME, order=str(order), own_output=OWN_OUTPUT)


def starter_cell(order: Path, pid: str = PID) -> str:
    """Return the code that spawns a frozen starter beside the kernel (its pid in `pid`):
    continued, it starts the kernel's own command afresh, on the connection file named in
    `order` in place of the one it started on (a fork's: its origin's)."""
    return STARTER.format(
        launch=LAUNCH,
        output=copy_launcher.OUTPUT,
        starter=str(STARTER_PROGRAM),
        order=str(order),
        pid=pid,
    )


def cuda_guard() -> str:
    """Return the code that stops a copying cell, before anything is copied, in a kernel that
    holds a CUDA context (a copy would fail on it)."""
    return f"if {GPU}:\n    raise RuntimeError({CUDA!r})\n"


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


# Evaluated in the kernel before it is copied: what its copy would lack or must not carry.
# Threads of the kernel's own (ipykernel's, IPython's, pyzmq's: by the module of what they run)
# are made again in a copy; any other thread is not in it.
THREADS = (
    "[t.name for t in __import__('threading').enumerate() "
    "if t is not __import__('threading').main_thread() "
    "and (getattr(getattr(t, '_target', None), '__module__', None) or type(t).__module__)"
    ".split('.')[0] not in ('ipykernel', 'IPython', 'zmq', 'jupyter_client')]"
)
# Open TCP and UDP sockets are shared by a copy with its kernel: named in the reply.
SOCKETS = f"__import__('sys').{copy_launcher.SOCKETS}()"
# A CUDA context does not survive fork(): a copy of a kernel that made one would fail on it.
GPU = "bool(__import__('sys').modules.get('torch') and __import__('torch').cuda.is_initialized())"
