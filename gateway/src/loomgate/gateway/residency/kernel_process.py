"""A kernel's own process, the one that runs its kernel command (inside its sandbox, below the
bubblewrap the gateway launched), found in /proc; and its resident memory."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")


def own_pid(launched: int | None, connection_file: str) -> int | None:
    """Return the pid of the kernel itself: of `launched` (the process the gateway started) and
    its descendants, the deepest whose arguments name `connection_file` (bubblewrap's name it
    too, in the command they run; a shell on the way names it until it execs). None when none
    does; `launched` itself where there is no /proc (macOS: sandbox-exec execs the kernel)."""
    if launched is None:
        return None
    if not PROC.is_dir():
        return launched
    name = Path(connection_file).name
    found: int | None = None
    level = [launched]
    while level:
        # Its copies run its command too, stopped (checkpoints, starters): never the kernel.
        found = next(
            (pid for pid in reversed(level) if runs_with(pid, name) and not stopped(pid)), found
        )
        level = [child for pid in level for child in all_children(pid)]
    return found


def all_children(pid: int) -> list[int]:
    """Return the pids of process `pid`'s children, whichever of its threads started them."""
    try:
        tasks = list((PROC / str(pid) / "task").iterdir())
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def runs_with(pid: int, name: str) -> bool:
    """Return whether one of process `pid`'s arguments names the file `name`."""
    try:
        arguments = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return names_file(arguments, name)


def names_file(arguments: Iterable[bytes], name: str) -> bool:
    """Return whether an argument is the file `name` or a path or option ending in it."""
    wanted = os.fsencode(name)
    return any(
        argument == wanted or argument.endswith((b"/" + wanted, b"=" + wanted))
        for argument in arguments
    )


def rss_bytes(pid: int | None) -> int | None:
    """Return the resident memory of process `pid` in bytes (None where /proc cannot tell)."""
    if pid is None:
        return None
    try:
        status = (PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return None


def children(pid: int) -> list[int]:
    """Return the pids of process `pid`'s children (none when it has ended)."""
    try:
        listed = (PROC / str(pid) / "task" / str(pid) / "children").read_text()
    except OSError:
        return []
    return [int(child) for child in listed.split()]


def host_pid(parent: int, inner: int) -> int | None:
    """Return the pid, as the host numbers it, of the child of process `parent` that its own pid
    namespace numbers `inner` (a sandbox's numbers are not the host's; the same outside one)."""
    for child in children(parent):
        try:
            status = (PROC / str(child) / "status").read_text()
        except OSError:
            continue
        lines = status.splitlines()
        numbers = next((line.split()[1:] for line in lines if line.startswith("NSpid:")), [])
        if numbers and int(numbers[-1]) == inner:
            return child
    return None


def private_bytes(pid: int) -> int | None:
    """Return the memory process `pid` alone holds (its private pages, clean and dirty), in
    bytes; None where /proc cannot tell."""
    try:
        rollup = (PROC / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in rollup.splitlines()[1:] if ":" in line)
    try:
        return sum(int(fields[key].split()[0]) * 1024 for key in ("Private_Clean", "Private_Dirty"))
    except (KeyError, ValueError):
        return None


def resident_bytes(pid: int) -> int | None:
    """Return the memory process `pid` has resident, shared or not, in bytes (at once, where
    `private_bytes` walks every page); None where /proc cannot tell."""
    try:
        statm = (PROC / str(pid) / "statm").read_text().split()
    except OSError:
        return None
    return int(statm[1]) * os.sysconf("SC_PAGE_SIZE") if len(statm) > 1 else None


def stopped(pid: int) -> bool:
    """Return whether process `pid` is stopped (by a signal: /proc/PID/stat's state T)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "T"
