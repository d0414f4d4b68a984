"""Dropping every capability on one thread: what it starts has none (this machine's tests run as
root, so there are some to drop), the process's other threads keep theirs."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

from loomgate.gateway.sandbox.confinement import capabilities

SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")


def sets_of(status: str) -> dict[str, str]:
    """Return the capability sets of a /proc/…/status text."""
    found = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return {name: found[name].strip() for name in SETS}


def test_a_thread_that_dropped_them_starts_processes_without_any() -> None:
    caller = Path(f"/proc/self/task/{threading.get_native_id()}/status")
    before = sets_of(caller.read_text())
    assert int(before["CapEff"], 16) != 0  # root here: something to drop
    seen: list[dict[str, str]] = []

    def drop_then_start() -> None:
        capabilities.drop_all()
        seen.append(sets_of(Path("/proc/thread-self/status").read_text()))
        child = subprocess.run(
            ["cat", "/proc/self/status"], capture_output=True, text=True, check=True
        )
        seen.append(sets_of(child.stdout))

    thread = threading.Thread(target=drop_then_start)
    thread.start()
    thread.join()
    none = dict.fromkeys(SETS, "0000000000000000")
    assert seen == [none, none]  # the thread, and what it started (root's exec gains none)
    assert sets_of(caller.read_text()) == before  # the caller's thread keeps its own
    assert capabilities.last_cap() >= 40  # CAP_CHECKPOINT_RESTORE, Linux 5.9
