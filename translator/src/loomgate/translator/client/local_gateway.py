"""The local gateway: found through gateway.json, or started as a detached daemon when down.

A gateways.toml entry of `kind = "jupyter"` is reached the same way: through a local gateway in
upstream mode of its own (its own state dir under `upstreams/`, a free port), started for it on
first use and reused by later conversations.

The local gateway is the one named by `gateway.json` in the state dir: if that file names a
gateway that answers with its token, it is used, whatever port it listens on. Otherwise the
gateway is started on the port of the target URL, as a daemon that is not our child (a launcher
process starts it in a new session and exits), so it outlives this translator, never becomes
our zombie, and is not hit by signals sent to our process group. It runs in the home directory
so that it does not pin the caller's working directory; kernels get their cwd explicitly.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from loomgate.shared.credentials import carries_credentials
from loomgate.shared.paths import (
    DAEMON_LOG,
    DEFAULT_PORT,
    GATEWAY_FILE,
    ensure_private_dir,
    read_gateway_file,
    read_port_file,
)
from loomgate.shared.paths import state_dir as default_state_dir
from loomgate.translator.client.errors import GatewayError, Timeout, Unreachable
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.processes import process_alive
from loomgate.translator.client.session import READ_TIMEOUT
from loomgate.translator.client.target import LOCAL_URL, GatewayTarget, TokenSource

LOCK_FILE = "autostart.lock"
POLL_SECONDS = 0.1
# A waiting translator gives the one starting the gateway its whole timeout, and then some.
LOCK_MARGIN = 10.0
LOCAL_NAME = "local"
UPSTREAMS_DIR = "upstreams"  # in the state dir: a state dir per kind = "jupyter" gateway
# The variables the upstream's token and headers reach an upstream-mode gateway in (it takes
# them out of its environment at once; they never go on a command line).
UPSTREAM_TOKEN_VAR = "LOOMGATE_UPSTREAM_TOKEN"
UPSTREAM_HEADERS_VAR = "LOOMGATE_UPSTREAM_HEADERS"
PROBE_TIMEOUT = 1.0  # for a connection to a port on this machine

# Runs in a short-lived launcher process: starts the gateway in its own session with its output
# appended to the log, prints its pid and exits, so the gateway is reparented away from us.
DAEMON_VARIABLES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "TMPDIR",
        "VIRTUAL_ENV",
        "LOOMGATE_STATE_DIR",
        "LOOMGATE_SANDBOX_MECHANISM",
        "PYTHONPATH",
        "PYTHONHOME",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
    }
)
DAEMON_PREFIXES = ("LC_", "XDG_", "JUPYTER_", "CONDA_", "UV_")
LAUNCHER = """
import os, subprocess, sys
log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
daemon = subprocess.Popen(
    sys.argv[3:], cwd=sys.argv[2], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
    start_new_session=True, close_fds=True,
)
print(daemon.pid, flush=True)
"""


async def open_local_client(
    target: GatewayTarget,
    *,
    autostart: bool,
    state_dir: Path | None = None,
    timeout: float = 60,
    request_timeout: float = READ_TIMEOUT,
) -> GatewayClient:
    """Return a client of the local gateway, starting it first if `autostart` and it is down."""
    directory = state_dir or default_state_dir()
    client = await running_gateway(directory, target, request_timeout=request_timeout)
    if client is not None:
        return client
    if not autostart:
        raise Unreachable(
            f"cannot reach {described(target)} at {target.url} (it is not running); start it "
            "with `loomgate-gateway`, or drop --no-autostart"
        )
    ensure_private_dir(directory)
    async with exclusive(directory / LOCK_FILE, timeout + LOCK_MARGIN):
        # Whoever held the lock before us may have started it.
        client = await running_gateway(directory, target, request_timeout=request_timeout)
        if client is not None:
            return client
        host, port = daemon_address(directory, target)
        if port and await listening(host, port):
            raise Unreachable(
                f"port {port} on {host} is held by another program (not the local gateway); "
                "start the gateway on a free port with `loomgate gateway start --port N`: "
                "loomgate-mcp and loomgate find it there through gateway.json"
            )
        pid = await start_daemon(directory, target)
        client = await wait_until_up(directory, target, pid, timeout)
        client.request_timeout = request_timeout
        return client


def start_in_background(target: GatewayTarget) -> threading.Thread | None:
    """Return a thread starting the local gateway, when `target` is it and it is down (None
    when it runs): a new translator overlaps the gateway's start with its own imports, and
    its first tool call finds the gateway up, or waits on the start lock for it.

    A start that fails here is not reported: the first tool call starts it again and says why.
    """
    if not target.local:
        return None
    info = read_gateway_file(default_state_dir())
    if info is not None and process_alive(info["pid"]):
        return None

    async def start() -> None:
        client = await open_local_client(target, autostart=True)
        await client.aclose()

    def run() -> None:
        with contextlib.suppress(Exception):
            asyncio.run(start())

    thread = threading.Thread(target=run, name="loomgate-autostart", daemon=True)
    thread.start()
    return thread


async def running_gateway(
    directory: Path,
    target: GatewayTarget,
    pid: int | None = None,
    *,
    request_timeout: float = READ_TIMEOUT,
) -> GatewayClient | None:
    """Return a client of the gateway gateway.json names, if it answers with its token."""
    info = read_gateway_file(directory)
    if info is None or (pid is not None and info["pid"] != pid):
        return None
    client = GatewayClient(
        info["url"],
        info["token"],
        verify=target.verify if not target.upstream else True,
        name=target.name if target.upstream and target.name else LOCAL_NAME,
        local=True,
        request_timeout=request_timeout,
        token_source=gateway_file(directory),
    )
    try:
        await client.info()
    except GatewayError:
        await client.aclose()
        return None
    except BaseException:
        await client.aclose()
        raise
    return client


def gateway_file(directory: Path) -> TokenSource:
    """Return the source of a token read from the gateway.json in `directory` (read again when
    the gateway refuses it: `loomgate gateway rotate-token` renews it)."""
    return TokenSource(
        f"in {directory / GATEWAY_FILE}, also when read again",
        "is the gateway at this address the one of that state dir?",
        gateway_file_dir=directory,
    )


@contextlib.asynccontextmanager
async def exclusive(path: Path, timeout: float) -> AsyncIterator[None]:
    """Hold an exclusive lock on `path` (polling, so the event loop never blocks)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if loop.time() > deadline:
                    raise Timeout(
                        f"another process has been starting the local gateway for over "
                        f"{timeout:g} s (it holds {path})"
                    ) from None
                await asyncio.sleep(POLL_SECONDS / 2)
        yield
    finally:
        os.close(fd)


def gateway_command(
    *,
    host: str | None = None,
    port: int | None = None,
    state_dir: Path | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """Return the command line that runs `loomgate-gateway` here (GatewayError if not installed).

    The one place the gateway's command line is built: autostart, `loomgate gateway start`
    and the tests all run the gateway through it.
    """
    args = [] if host is None else ["--host", host]
    args += [] if port is None else ["--port", str(port)]
    args += [] if state_dir is None else ["--state-dir", str(state_dir)]
    args += extra
    if importlib.util.find_spec("loomgate.gateway") is not None:
        return [sys.executable, "-m", "loomgate.gateway", *args]
    installed = shutil.which("loomgate-gateway")
    if installed is not None:
        return [installed, *args]
    raise Unreachable(
        "the local gateway is not running and loomgate-gateway is not installed here; "
        "install loomgate-gateway, or pass --gateway with a remote gateway"
    )


def daemon_address(directory: Path, target: GatewayTarget) -> tuple[str, int]:
    """Return the host and port a gateway started for `target` listens on.

    Unless `target` names an address of its own, the new one starts on the port the state
    dir's gateway last listened on (kept after a clean stop, `loomgate gateway start --port`
    changes it), or at the address of a gateway that died without cleaning up, where its
    clients look for it.
    """
    if target.upstream:
        return "127.0.0.1", 0  # any free port: clients find it through its gateway.json
    if target.url != LOCAL_URL:
        parts = urlsplit(target.url)
        return parts.hostname or "127.0.0.1", parts.port or DEFAULT_PORT
    died = read_gateway_file(directory)
    parts = urlsplit(died["url"] if died is not None else target.url)
    kept = read_port_file(directory)
    return parts.hostname or "127.0.0.1", kept or parts.port or DEFAULT_PORT


async def listening(host: str, port: int) -> bool:
    """Return whether something accepts connections at host:port."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), PROBE_TIMEOUT)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def start_daemon(directory: Path, target: GatewayTarget) -> int:
    """Return the pid of a newly started, detached gateway for `target` (host and port)."""
    host, port = daemon_address(directory, target)
    extra, secrets = upstream_arguments(target) if target.upstream else ([], {})
    command = gateway_command(host=host, port=port, state_dir=directory, extra=extra)
    cwd = str(Path.home()) if Path.home().is_dir() else str(directory)
    launcher = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        LAUNCHER,
        str(directory / DAEMON_LOG),
        cwd,
        *command,
        env={**daemon_environment(os.environ), **secrets},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await launcher.communicate()
    try:
        return int(out.decode().strip())
    except ValueError:
        reason = last_line(err.decode(errors="replace")) or f"exit code {launcher.returncode}"
        raise Unreachable(f"could not start {described(target)} ({reason})") from None


def described(target: GatewayTarget) -> str:
    """Return how messages name the gateway autostarted for `target`."""
    if target.upstream:
        return f"the gateway for {target.name or target.url} (upstream mode)"
    return "the local gateway"


def upstream_state_dir(target: GatewayTarget) -> Path:
    """Return the state dir of the upstream-mode gateway for a kind = "jupyter" entry (by its
    name and URL: an entry pointed elsewhere gets a gateway, and records, of its own)."""
    key = hashlib.sha256(target.url.encode()).hexdigest()[:8]
    return default_state_dir() / UPSTREAMS_DIR / f"{target.name or 'upstream'}-{key}"


def upstream_arguments(target: GatewayTarget) -> tuple[list[str], dict[str, str]]:
    """Return the gateway's upstream options for `target`, and the variables carrying its
    secrets (the token and headers are passed in the environment, never as arguments)."""
    args = ["--upstream", target.url, "--upstream-verify", "true" if target.verify else "false"]
    secrets: dict[str, str] = {}
    if target.token:
        args += ["--upstream-token-env", UPSTREAM_TOKEN_VAR]
        secrets[UPSTREAM_TOKEN_VAR] = target.token
    if target.headers:
        args += ["--upstream-headers-env", UPSTREAM_HEADERS_VAR]
        secrets[UPSTREAM_HEADERS_VAR] = target.headers
    return args, secrets


def daemon_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """Return the environment an autostarted gateway gets: the basics, never our secrets.

    The gateway outlives this conversation and its kernels inherit its environment, so the
    host's variables (API keys, LOOMGATE_TOKEN …) are not shipped wholesale, and a passed name
    whose value carries a URL's credentials (UV_INDEX_URL=https://user:secret@…) stays behind.
    """
    return {
        key: value
        for key, value in environ.items()
        if (key in DAEMON_VARIABLES or key.startswith(DAEMON_PREFIXES))
        and not carries_credentials(value)
    }


async def wait_until_up(
    directory: Path, target: GatewayTarget, pid: int, timeout: float
) -> GatewayClient:
    """Return a client of the started gateway `pid` once it answers (GatewayError otherwise)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    log_path = directory / DAEMON_LOG
    while True:
        client = await running_gateway(directory, target, pid)
        if client is not None:
            return client
        if not process_alive(pid):
            tail = last_line(read_tail(log_path))
            reason = f" ({tail})" if tail else ""
            raise Unreachable(f"{described(target)} exited while starting{reason}; see {log_path}")
        if loop.time() > deadline:
            raise Timeout(
                f"{described(target)} (pid {pid}) did not answer within {timeout:g} s of "
                f"starting; see {log_path}"
            )
        await asyncio.sleep(POLL_SECONDS)


def read_tail(path: Path, size: int = 4096) -> str:
    """Return the last `size` bytes of `path` as text ("" if unreadable)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def last_line(text: str) -> str:
    """Return the last non-blank line of `text`, without a log prefix, at most 300 characters."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    line = re.sub(r"^\[[A-Z] [^\]]*\]\s*", "", lines[-1])
    return line.removeprefix("ERROR: ").rstrip(".")[:300]
