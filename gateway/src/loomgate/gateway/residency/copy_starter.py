"""The starter of fresh kernels inside a kernel's sandbox: run by path in the kernel's own Python
(`python -I -S copy_starter.py ORDER CONNECTION_FILE ARGV…`, spawned by the kernel in the cell
kernels/kernel_copy.py's `starter_cell` makes), it imports nothing but the standard library.

It stops itself; each time it is continued (SIGCONT) it forks a kernel of `ARGV` (the kernel's
own command, in the environment it started with) with `CONNECTION_FILE` replaced by the file the
`ORDER` file names, then stops again. Spawned, it holds none of the kernel's memory.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path


def main() -> None:
    """Start a fresh kernel each time this process is continued."""
    order, named, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts are its kernel's
    while True:
        os.kill(os.getpid(), signal.SIGSTOP)
        if os.fork() == 0:
            target = Path(order).read_text()
            os.setsid()  # a session of its own, as every kernel loomgate starts
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.execv(argv[0], [argument.replace(named, target) for argument in argv])


if __name__ == "__main__":
    main()
