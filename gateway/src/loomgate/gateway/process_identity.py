"""Which process a pid names: its start time and the boot, so a reused pid is never mistaken."""

from __future__ import annotations

import asyncio
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROC = Path("/proc")
POLL_SECONDS = 0.1


def boot_id() -> str:
    """Return this boot's id (empty where the system does not give one)."""
    try:
        return (PROC / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return ""


def start_time(pid: int) -> str | None:
    """Return when process `pid` started, in the system's own units; None if it is not alive.

    On Linux the start time in clock ticks since boot (/proc/PID/stat field 22); elsewhere what
    `ps -o lstart=` prints. A zombie counts as not alive.
    """
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except FileNotFoundError:
        if PROC.is_dir():
            return None
        return ps_start_time(pid)
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # state: a zombie or a dead process
        return None
    return fields[19]  # field 22 of the whole line; two fields precede the ")"


def start_seconds(pid: int) -> float | None:
    """Return when process `pid` started, in seconds since the epoch (Linux; None elsewhere or
    if it is not alive)."""
    ticks = start_time(pid)
    if ticks is None or not ticks.isdigit():
        return None
    try:
        stat = (PROC / "stat").read_text()
    except OSError:
        return None
    boot = next((line.split()[1] for line in stat.splitlines() if line.startswith("btime ")), None)
    if boot is None:
        return None
    return int(boot) + int(ticks) / os.sysconf("SC_CLK_TCK")


def ps_start_time(pid: int) -> str | None:
    """Return `ps`'s start time of `pid` (systems without /proc), or None."""
    try:
        out = subprocess.run(
            ["ps", "-o", "lstart=", "-o", "stat=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    if not out or out.split()[-1].startswith("Z"):
        return None
    return " ".join(out.split()[:-1])


@dataclass(frozen=True)
class ProcessIdentity:
    """A process as it can be recognised later: pid, start time and boot."""

    pid: int
    started: str
    boot: str

    @classmethod
    def of(cls, pid: int | None) -> ProcessIdentity | None:
        """Return the identity of the live process `pid` (None if there is none)."""
        if pid is None:
            return None
        started = start_time(pid)
        return None if started is None else cls(pid, started, boot_id())

    def is_alive(self) -> bool:
        """Return whether this very process still runs (not a later one with the same pid)."""
        return self.boot == boot_id() and start_time(self.pid) == self.started

    async def ended(self) -> None:
        """Return once this process has ended (at once if it already has).

        It is not the gateway's child, so there is no exit to wait for: a pidfd (Linux) becomes
        readable when it ends; elsewhere the pid is polled.
        """
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            while self.is_alive():  # noqa: ASYNC110 (no event exists for a stranger's exit)
                await asyncio.sleep(POLL_SECONDS)
            return
        loop = asyncio.get_running_loop()
        exited: asyncio.Future[None] = loop.create_future()
        try:
            if not self.is_alive():  # checked after opening: the pidfd is this very process
                return
            loop.add_reader(pidfd, settle, exited)
            await exited
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)

    def to_json(self) -> dict[str, Any]:
        """Return the identity as a JSON object."""
        return {"pid": self.pid, "started": self.started, "boot": self.boot}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessIdentity:
        """Return the identity stored by `to_json` (ValueError if it is malformed)."""
        try:
            return cls(int(data["pid"]), str(data["started"]), str(data["boot"]))
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a process identity: {data!r}") from e


def settle(future: asyncio.Future[None]) -> None:
    """Resolve `future` (once)."""
    if not future.done():
        future.set_result(None)
