"""Real `loomgate-gateway` processes for tests: start, wait for gateway.json, stop, check leaks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import httpx

from loomgate.shared.paths import GATEWAY_FILE
from loomgate.translator.client.local_gateway import gateway_command

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def free_port() -> int:
    """Return a TCP port that was free on loopback a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_pids(pid: int) -> set[int]:
    """Return the pids of all descendants of `pid` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """Return whether process `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_gone(pids: set[int], timeout: float) -> set[int]:
    """Wait until none of `pids` is alive; return those still alive after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        remaining = {pid for pid in pids if alive(pid)}
        if not remaining:
            return set()
        time.sleep(0.05)
    return {pid for pid in pids if alive(pid)}


@dataclass
class GatewayProcess:
    """One gateway subprocess with its own state dir and port."""

    state_dir: Path
    port: int = field(default_factory=free_port)
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None
    token: str = ""
    launcher: list[str] = field(default_factory=list)  # a command prefix, e.g. nsenter …
    root: Path = Path("/")  # where the gateway's own view of the filesystem is seen from here

    def seen(self, path: Path) -> Path:
        """Return `path` as the gateway sees it (inside its mount namespace, if it has one)."""
        return self.root / path.relative_to("/")

    @property
    def url(self) -> str:
        """Return the gateway's base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict[str, str]:
        """Return the auth header."""
        return {"Authorization": f"token {self.token}"}

    def _spawn(self, env: dict[str, str], log: BinaryIO) -> subprocess.Popen[bytes]:
        """Return the started gateway process, writing both its streams to `log`."""
        command = gateway_command(port=self.port, extra=["--log-level", "DEBUG", *self.extra_args])
        return subprocess.Popen([*self.launcher, *command], env=env, stdout=log, stderr=log)

    def start(self) -> GatewayProcess:
        """Start the gateway and wait until it answers /api/loomgate/info."""
        info_file = self.seen(self.state_dir / GATEWAY_FILE)
        if info_file.exists():
            info_file.unlink()
        env = {**os.environ, "LOOMGATE_STATE_DIR": str(self.state_dir), **self.env}
        with (self.state_dir.parent / f"{self.state_dir.name}.stderr").open("ab") as log:
            self.proc = self._spawn(env, log)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}")
            if info_file.exists():
                self.token = json.loads(info_file.read_text())["token"]
                try:
                    r = httpx.get(f"{self.url}/api/loomgate/info", headers=self.headers, timeout=2)
                    if r.status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("gateway did not come up")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the gateway with `sig` and check that none of its kernels outlive it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        children = child_pids(self.proc.pid)
        self.proc.send_signal(sig)
        try:
            self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT)
        leftovers = wait_gone(children, STOP_TIMEOUT)
        for pid in leftovers:
            os.kill(pid, signal.SIGKILL)
        assert not leftovers, f"kernel processes outlived the gateway: {sorted(leftovers)}"

    def kill(self) -> None:
        """SIGKILL the gateway (its kernels must still exit on their own)."""
        self.stop(signal.SIGKILL)


def gateway_with_token(
    state_dir: Path, token: str, launcher: list[str] | None = None, root: Path = Path("/")
) -> GatewayProcess:
    """Return a (not started) gateway that reads `token` via --token-env: restarts keep it."""
    return GatewayProcess(
        state_dir,
        extra_args=["--token-env", "LOOMGATE_TEST_TOKEN"],
        env={"LOOMGATE_TEST_TOKEN": token},
        launcher=launcher or [],
        root=root,
    )
