"""Kernel processes between their launch and their resident.json: a marker in the state dir's
`launching/`, written before the process is started and again, with its identity, at once
after, so that a gateway killed in between leaves nothing the next one cannot end.

A marker lives until resident.json takes over (a kernel or pool kernel whose process the next
gateway takes back or ends) or the process is cleaned up. A gateway starting ends the process of
every marker left: the one its identity proves (pid, start time, boot), or, when the gateway
died before it knew the pid, the one whose command line names the marker's connection file and
which started after the marker was written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from loomgate.gateway.process_identity import ProcessIdentity, start_seconds
from loomgate.gateway.residency.kernel_files import remove_kernel_files
from loomgate.gateway.sandbox import SandboxLaunch
from loomgate.shared.paths import write_json_atomic

LAUNCHING_DIR = "launching"  # in the state dir: a marker per kernel process being launched
LEFTOVER_REMOVE_TIMEOUT = 0.5  # how long a killed sandbox may take to empty


class LaunchMarkers:
    """The markers of one state dir's kernel processes not yet in a resident.json."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _marker(self, kernel_id: str) -> Path:
        return self.directory / f"{kernel_id}.json"

    def launching(self, kernel_id: str, connection_file: str, named: str | None = None) -> None:
        """Note, before its process starts, that kernel `kernel_id` is being launched, with the
        connection file its command line names (`named`; a relayed kernel's own, else the
        gateway's `connection_file`)."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = {
            "connection_file": connection_file,
            "named": named or connection_file,
            "since": time.time(),
            "identity": None,
        }
        write_json_atomic(self._marker(kernel_id), data)

    def launched(
        self,
        kernel_id: str,
        connection_file: str,
        identity: ProcessIdentity | None,
        pgid: int | None,
        sandbox: SandboxLaunch | None,
    ) -> None:
        """Note the launched process of kernel `kernel_id` (before anything else can run)."""
        marker = self._marker(kernel_id)
        data: dict[str, Any] = {"connection_file": connection_file, "since": time.time()}
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            written = json.loads(marker.read_text())
            data["since"] = written["since"]
            data["named"] = written.get("named", connection_file)
        data.update(
            identity=identity.to_json() if identity is not None else None,
            pgid=pgid,
            sandbox=sandbox.to_json() if sandbox is not None else None,
        )
        write_json_atomic(marker, data)

    def forget(self, kernel_id: str) -> None:
        """Drop kernel `kernel_id`'s marker: its resident.json (or its end) took over."""
        with contextlib.suppress(OSError):
            self._marker(kernel_id).unlink(missing_ok=True)

    def end_unowned(self, log: logging.Logger) -> int:
        """End the process of every marker an earlier gateway left; return how many ran."""
        ended = 0
        if not self.directory.is_dir():
            return 0
        for marker in sorted(self.directory.glob("*.json")):
            try:
                data = json.loads(marker.read_text())
                connection_file = str(data["connection_file"])
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("Removing an unreadable launch marker %s: %s", marker, e)
                marker.unlink(missing_ok=True)
                continue
            if end_launch(data, connection_file):
                ended += 1
            remove_kernel_files(connection_file)
            marker.unlink(missing_ok=True)
        if ended:
            log.warning("Ended %d kernel(s) a killed gateway was starting", ended)
        return ended


def end_launch(data: dict[str, Any], connection_file: str) -> bool:
    """SIGKILL the process a marker names; return whether one was running."""
    named = str(data.get("named") or connection_file)  # what its command line names
    sandbox = SandboxLaunch.from_json(data["sandbox"]) if data.get("sandbox") else None
    since = float(data.get("since") or 0.0)
    if data.get("identity"):
        identity = ProcessIdentity.from_json(data["identity"])
        pids = [identity.pid] if identity.is_alive() else []
        if sandbox is not None and sandbox.init is None:
            # Killed before bwrap named its init: the init is in a session of its own (bwrap's
            # --new-session), so ending bwrap leaves it and the kernel running. Both name the
            # connection file on their command line.
            pids += [pid for pid in started_with(named, since) if pid not in pids]
    else:
        pids = started_with(named, since)
    for pid in pids:
        if sandbox is not None:  # its init ends everything in the sandbox
            sandbox.signal(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(data.get("pgid") or pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    if sandbox is not None:
        sandbox.remove(timeout=LEFTOVER_REMOVE_TIMEOUT)
    return bool(pids)


def started_with(connection_file: str, since: float) -> list[int]:
    """Return the pids of processes started after `since` whose command line names
    `connection_file` (a launch whose pid was never noted)."""
    wanted = connection_file.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if wanted not in (entry / "cmdline").read_bytes().split(b"\0"):
                continue
            started = start_seconds(int(entry.name))
            if started is not None and started >= since - 1.0:
                found.append(int(entry.name))
    return found
