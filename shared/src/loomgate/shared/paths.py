"""Where loomgate keeps its state and config, private files in them, and `gateway.json`."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypedDict

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
GATEWAY_FILE = "gateway.json"  # how local clients find the running gateway
LOG_FILE = "gateway.log"  # the gateway's own log
DAEMON_LOG = "gateway.stdout.log"  # what an autostarted gateway prints before its log is open
TOKEN_FILE = "token"  # the local gateway's token, kept across restarts (clients need nothing new)
MONITOR_TOKEN_FILE = "monitor_token"  # its read-only monitor token, kept likewise
PORT_FILE = "port"  # the port it last listened on, kept after a stop: the next start's


class _GatewayFileBase(TypedDict):
    url: str
    token: str
    pid: int
    version: str


class GatewayFile(_GatewayFileBase, total=False):
    """What a running local gateway tells local clients (`monitor_token`: its read-only one)."""

    monitor_token: str


def state_dir() -> Path:
    """Return $LOOMGATE_STATE_DIR, else $XDG_STATE_HOME/loomgate, else ~/.local/state/loomgate."""
    explicit = os.environ.get("LOOMGATE_STATE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "loomgate"


def config_dir() -> Path:
    """Return the config dir: $XDG_CONFIG_HOME/loomgate, else ~/.config/loomgate."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "loomgate"


def ensure_private_dir(path: Path) -> Path:
    """Return `path`, created if needed, with mode 0700."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (made mode 0600, never through a link) while
    the block runs; the lock goes with the file descriptor, also when the process dies."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: Mapping[str, object]) -> None:
    """Replace `path` with `data` as JSON (mode 0600) in one rename: never half a file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # a leftover .tmp keeps its old mode through O_CREAT
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_gateway_file(directory: Path, info: GatewayFile) -> Path:
    """Write `gateway.json` into `directory` with mode 0600 (never readable by others)."""
    ensure_private_dir(directory)
    target = directory / GATEWAY_FILE
    write_json_atomic(target, info)
    return target


def read_gateway_file(directory: Path) -> GatewayFile | None:
    """Return the contents of `gateway.json` in `directory`, or None if absent or unreadable."""
    try:
        data = json.loads((directory / GATEWAY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not {"url", "token", "pid"} <= data.keys():
        return None
    info = GatewayFile(
        url=str(data["url"]),
        token=str(data["token"]),
        pid=int(data["pid"]),
        version=str(data.get("version", "")),
    )
    if isinstance(data.get("monitor_token"), str):
        info["monitor_token"] = data["monitor_token"]
    return info


def read_token_file(directory: Path, name: str = TOKEN_FILE) -> str | None:
    """Return the token kept in the state dir, or None (absent, unreadable or empty)."""
    try:
        token = (directory / name).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return token or None


def write_token_file(directory: Path, token: str, name: str = TOKEN_FILE) -> None:
    """Keep `token` in the state dir (mode 0600) for the gateway's later starts."""
    ensure_private_dir(directory)
    path = directory / name
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    tmp.replace(path)


def read_port_file(directory: Path) -> int | None:
    """Return the port the state dir's gateway last listened on (None: none kept, or unreadable)."""
    kept = read_token_file(directory, PORT_FILE)
    if kept is None or not kept.isdigit():
        return None
    port = int(kept)
    return port if 0 < port < 65536 else None


def write_port_file(directory: Path, port: int) -> None:
    """Keep `port` in the state dir as the one the gateway starts on until another is chosen."""
    write_token_file(directory, str(port), PORT_FILE)
