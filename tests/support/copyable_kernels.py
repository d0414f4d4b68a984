"""An ipykernel started under loomgate's copy launcher (residency/copy_launcher.py) by
jupyter_client, on ipc sockets: stopped afterwards."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from jupyter_client import BlockingKernelClient, KernelManager
from jupyter_client.kernelspec import KernelSpec

from loomgate.gateway.residency.kernel_command import LAUNCHER

READY_TIMEOUT = 60


@contextlib.contextmanager
def copyable_kernel(directory: Path) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    """Yield a started kernel under the copy launcher, its sockets in `directory`, and a client
    of it; both stopped afterwards."""
    km = KernelManager(transport="ipc", ip=str(directory / "k"))
    km._kernel_spec = KernelSpec(  # a spec of the test's own, not one from a data dir
        # History in memory, as loomgate keeps it: a copy shares no history file with its origin.
        argv=[
            sys.executable,
            str(LAUNCHER),
            "-f",
            "{connection_file}",
            "--HistoryManager.hist_file=:memory:",
        ],
        language="python",
        display_name="copyable",
    )
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=READY_TIMEOUT)
        yield km, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
