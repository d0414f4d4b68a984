"""The launcher of an ipykernel kernel that can be copied: run by path in the kernel's own
Python (`python copy_launcher.py -f CONNECTION_FILE`), it imports nothing of loomgate.

A copy is a fork of the kernel's process made by a cell (kernels/kernel_copy.py): in the child,
the cell names a connection file in `sys.loomgate_become` and stops the kernel's loop, so that
`IPKernelApp.start()` returns here, and the child starts a new kernel on that file around the
same InteractiveShell, its namespace whole.

The private uses of ipykernel live here alone (tests/gateway/test_kernel_copy.py fails without
each): the application's and the kernel's singletons cleared (`IPKernelApp.clear_instance`,
`IPythonKernel.clear_instance`) and a new asyncio loop (the inherited one is the origin's,
abandoned, never closed); the copy takes a session of its own (its origin's end signals the
origin's process group). The InteractiveShell singleton is kept on purpose: the new kernel takes
it, namespace and all.
"""

from __future__ import annotations

import asyncio
import os
import sys

from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp

BECOME = "loomgate_become"  # the attribute of `sys` a copy's cell sets: its connection file


def become(connection_file: str) -> None:
    """Start a kernel on `connection_file` around this process's InteractiveShell (a forked
    child whose inherited kernel loop has stopped)."""
    # A session of its own: its origin's end (a signal to the origin's process group) is not its.
    os.setsid()
    IPKernelApp.clear_instance()
    IPythonKernel.clear_instance()
    asyncio.set_event_loop(asyncio.new_event_loop())
    app = IPKernelApp.instance()
    app.initialize(["-f", connection_file])
    app.start()


def main() -> None:
    """Run the kernel; a forked child that was asked to become a copy starts it once the
    kernel's loop has stopped."""
    app = IPKernelApp.instance()
    app.initialize(sys.argv[1:])
    app.start()
    while (target := getattr(sys, BECOME, None)) is not None:
        setattr(sys, BECOME, None)
        become(target)


if __name__ == "__main__":
    main()
