"""A loaded machine, made on purpose: a process sharing one CPU with busy loops."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

BUSY_LOOPS = 3


@contextlib.contextmanager
def slowed(pid: int, busy_loops: int = BUSY_LOOPS) -> Iterator[None]:
    """Make process `pid` share one CPU with `busy_loops` busy loops, while the processes it
    started before (its kernels) keep theirs: it falls behind what they send."""
    before = os.sched_getaffinity(pid)
    cpu = min(before)
    loop = f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    busy = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(busy_loops)]
    os.sched_setaffinity(pid, {cpu})
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()
        os.sched_setaffinity(pid, before)
