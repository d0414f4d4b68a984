"""How loomgate shapes a local kernel's launch: an ipykernel command recognised, its IPython
history kept in memory (no SQLite file shared between kernels), and its ZMQ sockets made ipc
files in a dir of its own rather than TCP ports."""

from __future__ import annotations

import itertools
from typing import Any

# IPython's history database is one SQLite file shared by every kernel of the user: under many
# kernels a lock times out, IPython moves the file aside, and every other kernel's saving thread
# then prints its error into a cell's output. The record is a gateway kernel's history.
IPYTHON_HISTORY_IN_MEMORY = "--HistoryManager.hist_file=:memory:"
IPYKERNEL_MODULES = frozenset({"ipykernel_launcher", "ipykernel"})


def use_ipc(km: Any, prefix: str) -> None:
    """Make kernel manager `km` give its kernel ZMQ ipc sockets at `prefix`: files, no ports,
    so none another process can take between their choice and the kernel's bind."""
    km.transport = "ipc"
    km.ip = prefix
    km.cache_ports = False


def runs_ipykernel(argv: list[str]) -> bool:
    """Return whether a kernel spec's command runs ipykernel (`python -m ipykernel_launcher`)."""
    return any(
        flag == "-m" and module in IPYKERNEL_MODULES for flag, module in itertools.pairwise(argv)
    )
