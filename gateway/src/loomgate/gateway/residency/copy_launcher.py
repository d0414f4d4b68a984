"""The launcher of an ipykernel kernel that can be copied: run by path in the kernel's own
Python (`python copy_launcher.py -f CONNECTION_FILE`) in place of `-m ipykernel_launcher`, it
imports nothing of loomgate.

A copy is a fork of the kernel's process made by a cell (kernels/kernel_copy.py): in the child,
the cell names a connection file in `sys.loomgate_become` and stops the kernel's loop, so that
`IPKernelApp.start()` returns here, and the child starts a new kernel on that file around the
same InteractiveShell, its namespace whole.

The private uses of ipykernel live here alone (tests/gateway/test_kernel_copy.py fails without
each): the application's and the kernel's singletons cleared (`IPKernelApp.clear_instance`,
`IPythonKernel.clear_instance`), the streams ipykernel put in sys.stdout and sys.stderr (they
send through the origin's IOPub thread) and a new asyncio loop (the inherited one is the
origin's, abandoned, never closed). The InteractiveShell singleton is kept on purpose: the new
kernel takes it, namespace and all.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Run by path, Python put this file's dir first on sys.path, where `-m ipykernel_launcher` puts
# the working dir: a cell's `import kernel` must not find a module of loomgate's.
if sys.path and sys.path[0] == str(Path(__file__).resolve().parent):
    sys.path[0] = str(Path.cwd())

import asyncio

from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp

BECOME = "loomgate_become"  # the attribute of `sys` a copy's cell sets: its connection file
# The attribute of `sys` that keeps how this kernel was started (its command and environment as
# they were then), which a starter of fresh kernels (kernels/kernel_copy.py) starts again.
LAUNCH = "loomgate_launch"
# The attribute of `sys` that keeps the process's own stdout and stderr (its log), which ipykernel
# replaces by pipes its own thread reads: a copy has no such thread, and its origin's may be gone
# (a write would block once the pipe is full). A copy's first act is to take them back.
OUTPUT = "loomgate_output"


def become(connection_file: str) -> None:
    """Start a kernel on `connection_file` around this process's InteractiveShell (a forked
    child whose inherited kernel loop has stopped)."""
    # The origin's streams send through its IOPub thread, which a copy has not: the new kernel
    # makes its own around the process's own (its logging too).
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    IPKernelApp.clear_instance()
    IPythonKernel.clear_instance()
    asyncio.set_event_loop(asyncio.new_event_loop())
    app = IPKernelApp.instance()
    # No parent to watch: a copy's parent is its origin or a checkpoint, never the process that
    # started the kernel (JPY_PARENT_PID), and either may end first.
    app.initialize(["-f", connection_file, "--IPKernelApp.parent_handle=0"])
    app.start()


def main() -> None:
    """Run the kernel; a forked child that was asked to become a copy starts it once the
    kernel's loop has stopped."""
    setattr(sys, LAUNCH, ([sys.executable, *sys.orig_argv[1:]], dict(os.environ)))
    setattr(sys, OUTPUT, (os.dup(1), os.dup(2)))
    app = IPKernelApp.instance()
    app.initialize(sys.argv[1:])
    app.start()
    while (target := getattr(sys, BECOME, None)) is not None:
        setattr(sys, BECOME, None)
        become(target)


if __name__ == "__main__":
    main()
