"""Real `loomgate-gateway` processes for tests: start, wait for gateway.json, stop, check leaks.

Kernels outlive a gateway that is killed or signalled; `stop()` ends the gateway with its
kernels and ends those a killed gateway left behind, so no test leaks a kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import urlsplit

import httpx

from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency.resident import RESIDENT_FILE
from loomgate.shared.paths import GATEWAY_FILE, read_gateway_file
from loomgate.translator.client.local_gateway import UPSTREAMS_DIR, gateway_command

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
LOG_LINES_ON_FAILURE = 60  # the last lines (DEBUG left out) of a gateway's log a failure shows


class Served(Protocol):
    """A server a test talks HTTP to: a gateway, or a Jupyter server with loomgate in it."""

    @property
    def url(self) -> str: ...

    @property
    def headers(self) -> dict[str, str]: ...


def client(server: Served) -> httpx.AsyncClient:
    """Return an HTTP client of `server`, with its token (it survives the server's restarts)."""
    return httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=120)


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


def wait_refused(url: str, timeout: float = 30) -> None:
    """Wait until nothing listens at `url` any more.

    A killed process is a zombie before its last thread has closed its sockets: for a moment
    after `wait_gone`, connections are still accepted there, and then reset.
    """
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((parts.hostname, parts.port or 80), timeout=1).close()
        except ConnectionRefusedError:
            return
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"{url} still accepts connections after {timeout:g} s")


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
    monitor_token: str = ""
    launcher: list[str] = field(default_factory=list)  # a command prefix, e.g. nsenter …
    root: Path = Path("/")  # where the gateway's own view of the filesystem is seen from here
    cwd: Path | None = None  # the gateway's working directory (the tests' own when None)
    # Prewarmed kernels: none unless a test asks, so that tests can count a gateway's kernels.
    prewarm: int = 0
    # Every kernel process a run of this gateway started: a killed gateway leaves them running.
    kernels: set[ProcessIdentity] = field(default_factory=set)

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
        extra = ["--log-level", "DEBUG", "--prewarm", str(self.prewarm), *self.extra_args]
        command = gateway_command(port=self.port, extra=extra)
        return subprocess.Popen(
            [*self.launcher, *command], env=env, stdout=log, stderr=log, cwd=self.cwd
        )

    @property
    def log_path(self) -> Path:
        """Return the file the gateway's stdout and stderr (its log, at DEBUG) go to."""
        return self.state_dir.parent / f"{self.state_dir.name}.stderr"

    def start(self) -> GatewayProcess:
        """Start the gateway and wait until it answers /api/loomgate/info."""
        STARTED.append(self)
        info_file = self.seen(self.state_dir / GATEWAY_FILE)
        if info_file.exists():
            info_file.unlink()
        env = {**os.environ, "LOOMGATE_STATE_DIR": str(self.state_dir), **self.env}
        # Kernels under pytest's variable stop forwarding their subprocesses' output (ipykernel
        # turns its fd capture off); the gateway's kernels behave as in a person's use.
        env.pop("PYTEST_CURRENT_TEST", None)
        with self.log_path.open("ab") as log:
            self.proc = self._spawn(env, log)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}")
            if info_file.exists():
                written = json.loads(info_file.read_text())
                self.token, self.monitor_token = written["token"], written["monitor_token"]
                try:
                    r = httpx.get(f"{self.url}/api/loomgate/info", headers=self.headers, timeout=2)
                    if r.status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("gateway did not come up")

    def stop(self) -> None:
        """Stop the gateway and its kernels (as `loomgate gateway stop` does), and check that no
        kernel it ever ran outlives it; kernels a killed gateway left behind are ended here."""
        stopped_by_gateway = False
        if self.proc is not None and self.proc.poll() is None:
            self._remember_kernels()
            stopped_by_gateway = self._request_shutdown()
            if not stopped_by_gateway:
                self.proc.kill()
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT)
        survivors = {kernel.pid for kernel in self.kernels if kernel.is_alive()}
        self.kernels.clear()
        # Also those no run of it noted (a kill just after a launch): each names its connection
        # file, whether its parent is a gateway, bubblewrap or 1.
        survivors |= kernel_processes_of(self.state_dir)
        if not stopped_by_gateway:
            # No gateway took them back (the test killed it): end them by their own identity.
            for pid in survivors:
                end_process(pid)
            wait_gone(survivors, STOP_TIMEOUT)
            return
        leftovers = wait_gone(survivors, STOP_TIMEOUT)
        described = describe_processes(leftovers)
        for pid in leftovers:
            end_process(pid)
        assert not leftovers, f"kernel processes outlived `gateway stop`: {described}"

    def signal(self, signum: int) -> None:
        """Send `signum` to the gateway and wait for it to exit (its kernels keep running)."""
        assert self.proc is not None and self.proc.poll() is None
        self._remember_kernels()
        self.proc.send_signal(signum)
        self.proc.wait(STOP_TIMEOUT)

    def kill(self) -> None:
        """SIGKILL the gateway; its kernels keep running (a restart takes them back)."""
        self.signal(signal.SIGKILL)

    def kill_soon(self) -> None:
        """Note the gateway's kernels now, so that `kill_now` SIGKILLs it at once."""
        self._remember_kernels()

    def kill_now(self) -> None:
        """SIGKILL the gateway without a look at its processes first (see `kill_soon`)."""
        assert self.proc is not None and self.proc.poll() is None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(STOP_TIMEOUT)

    def kernel_pids(self) -> set[int]:
        """Return the pids of the kernel processes this gateway process started: all its
        descendants (for a confined kernel bwrap, the sandbox's init and the kernel)."""
        assert self.proc is not None
        return child_pids(self.proc.pid)

    def _remember_kernels(self) -> None:
        """Note the gateway's kernels: after it exits they are no longer its children."""
        pids = self.kernel_pids()
        resident = resident_kernels(self.seen(self.state_dir))
        for kernel in resident:  # a kernel taken back is not the gateway's child, nor its init's
            if kernel.is_alive():
                pids |= {kernel.pid, *child_pids(kernel.pid)}
        identities = (ProcessIdentity.of(pid) for pid in pids)
        self.kernels |= {identity for identity in identities if identity is not None}
        self.kernels |= resident

    def _request_shutdown(self) -> bool:
        """Ask the gateway to stop with its kernels; return whether it accepted."""
        try:
            r = httpx.post(
                f"{self.url}/api/loomgate/shutdown",
                headers=self.headers,
                json={"kernels": "stop"},
                timeout=10,
            )
        except httpx.HTTPError:
            return False
        return r.status_code == 202


# Every gateway this test process started, for the logs a failing test shows (conftest.py).
STARTED: list[GatewayProcess] = []


def logs_since(since: float) -> dict[Path, str]:
    """Return the end of the log of each gateway started here that wrote to it after `since`
    (DEBUG lines left out): what a failing test shows of the gateways it used."""
    tails: dict[Path, str] = {}
    for gateway in STARTED:
        path = gateway.log_path
        try:
            if path.stat().st_mtime < since:
                continue
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        kept = [line for line in lines if not line.startswith("[D ")]
        tails.setdefault(path, "\n".join(kept[-LOG_LINES_ON_FAILURE:]))
    return tails


async def prewarmed(http: httpx.AsyncClient, timeout: float = 60.0) -> list[dict[str, object]]:
    """Return the gateway's prewarmed kernels once one is ready (its report polled: no event
    announces a pool kernel's readiness)."""
    deadline = time.monotonic() + timeout
    while not (ready := (await http.get("/api/loomgate/info")).json()["prewarmed"]):
        assert time.monotonic() < deadline, "no prewarmed kernel became ready"
        await asyncio.sleep(0.02)
    return list(ready)


def resident_kernels(state_dir: Path, *, pool: bool = True) -> set[ProcessIdentity]:
    """Return the kernel processes a state dir says are running (bubblewrap and the sandbox's
    init, for a confined kernel): kept for the next gateway, and (with `pool`) prewarmed ones,
    which the next gateway ends."""
    found: set[ProcessIdentity] = set()
    paths = [*state_dir.glob(f"kernels/*/{RESIDENT_FILE}")]
    if pool:
        paths += state_dir.glob(f"pool/*/{RESIDENT_FILE}")
    for path in paths:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            provisioner = json.loads(path.read_text())["provisioner"]
            found.add(ProcessIdentity.from_json(provisioner["identity"]))
            # A confined kernel's sandbox init: killing bubblewrap alone would leave it running.
            sandbox = provisioner.get("sandbox")
            if sandbox and sandbox.get("init"):
                found.add(ProcessIdentity.from_json(sandbox["init"]))
    return found


def kernel_processes_of(state_dir: Path) -> set[int]:
    """Return the pids of live processes started for a kernel of a gateway on `state_dir`,
    noted anywhere or not, whatever their parent: each names its connection file (in the state
    dir's runtime dir) on its command line, as a kernel, bubblewrap and the sandbox's init do."""
    connection_files = bytes(state_dir / "runtime" / "kernel-")
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            words = (entry / "cmdline").read_bytes().split(b"\0")
            if any(word.startswith(connection_files) for word in words) and alive(int(entry.name)):
                found.add(int(entry.name))
    return found


def describe_processes(pids: set[int]) -> list[str]:
    """Return each process as `pid (parent P): command line`, cut short, for a failure."""
    described = []
    for pid in sorted(pids):
        try:
            parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        described.append(f"{pid} (parent {parent}): {command[:100]}")
    return described


def end_process(pid: int) -> None:
    """SIGKILL process `pid` and its process group, if it leads one (a confined kernel does
    not: it is in the group of the sandbox's init), and whatever of them is already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def kernel_processes_in(state_dir: Path) -> set[int]:
    """Return the pids of live processes a gateway on `state_dir` started: its kernels, whose
    connection files lie there, and children not yet running their program (still with the
    gateway's environment), found even if nothing recorded them."""
    marker = b"LOOMGATE_STATE_DIR=" + bytes(state_dir)
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            words = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
            started = any(word.startswith(bytes(state_dir)) for word in words)
            if (started or marker in environ) and alive(int(entry.name)):
                found.add(int(entry.name))
    return found


def stop_local_gateway(state_dir: Path) -> None:
    """Stop the gateway a state dir's gateway.json names, with its kernels, and check that no
    kernel the state dir knows of outlives it (for gateways a test did not start itself).

    Kernels whose gateway is gone (a test killed it) are ended here, by their own identity.
    """
    kernels = resident_kernels(state_dir)
    info = read_gateway_file(state_dir)
    stopped_by_gateway = False
    if info is not None and alive(info["pid"]):
        with contextlib.suppress(httpx.HTTPError):
            r = httpx.post(
                f"{info['url']}/api/loomgate/shutdown",
                headers={"Authorization": f"token {info['token']}"},
                json={"kernels": "stop"},
                timeout=10,
            )
            stopped_by_gateway = r.status_code == 202
        if wait_gone({info["pid"]}, STOP_TIMEOUT):
            os.kill(info["pid"], signal.SIGKILL)
            stopped_by_gateway = False
    survivors = {kernel.pid for kernel in kernels if kernel.is_alive()}
    leftovers = wait_gone(survivors, STOP_TIMEOUT) if stopped_by_gateway else survivors
    for pid in leftovers:
        end_process(pid)
    wait_gone(leftovers, STOP_TIMEOUT)
    if stopped_by_gateway:
        assert not leftovers, f"kernel processes outlived `gateway stop`: {sorted(leftovers)}"


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


def stop_upstream_gateways(state_dir: Path) -> None:
    """Stop every upstream-mode gateway a translator started under `state_dir` (one per
    gateways.toml `kind = "jupyter"` entry), with its kernels."""
    for gateway_dir in sorted((state_dir / UPSTREAMS_DIR).glob("*")):
        stop_local_gateway(gateway_dir)


def terminated_as_a_kernel_starts(
    gateway: GatewayProcess, *, until_resident: bool = False
) -> set[int]:
    """Start `gateway`, SIGTERM it as soon as a kernel process of it exists (with
    `until_resident`, once that kernel's resident.json is written too), and return the kernel
    processes of its state dir still alive 30 s after it exited; whatever a failure leaves is
    killed."""
    try:
        gateway.start()
        assert gateway.proc is not None
        deadline = time.monotonic() + 30
        while not gateway.kernel_pids() and time.monotonic() < deadline:
            pass
        while until_resident and not resident_kernels(gateway.state_dir):
            if time.monotonic() > deadline:
                break
        gateway.proc.terminate()
        gateway.proc.wait(30)
        return wait_gone(kernel_processes_in(gateway.state_dir), 30)
    finally:
        gateway.stop()
        for pid in kernel_processes_in(gateway.state_dir):  # what a failure left running
            os.kill(pid, signal.SIGKILL)
