"""A kernel process's files: its connection file (it holds the kernel's key), the log of its
own output beside it, its ipc sockets, and how they go when it ends."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loomgate.gateway.residency import shared_dirs
from loomgate.gateway.sandbox import remove_own_packages

DEATH_LOG = "kernel.log"  # a dead kernel's own output, kept beside its records (and gone with them)


def output_log_of(connection_file: Path) -> Path:
    """Return the log of a kernel's own output: its connection file's name, ending `.log`."""
    return connection_file.with_name(connection_file.stem + ".log")


def remove_kernel_files(connection_file: str, keep_log_in: Path | None = None) -> None:
    """Remove an ended kernel's connection file (it holds the kernel's key) and its output log;
    with `keep_log_in` (a kernel that died: its last words), move the log there instead."""
    if not connection_file:
        return
    connection = Path(connection_file)
    log = output_log_of(connection)
    remove_sockets(connection_info_in(connection))
    with contextlib.suppress(OSError):
        connection.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        if keep_log_in is not None and log.exists() and keep_log_in.is_dir():
            log.replace(keep_log_in / DEATH_LOG)
        else:
            log.unlink(missing_ok=True)


def remove_sockets(info: Mapping[str, Any]) -> None:
    """Remove the ipc socket files connection info `info` names, and their dir, the kernel's
    packages dir (unless its forks or its origin use it) and its own dir once empty (a confined
    kernel's sandbox removes the rest)."""
    prefix = remove_socket_files(info)
    if prefix is None:
        return
    if not shared_dirs.in_use(prefix.parent.parent):  # a fork's origin's, or its forks'
        remove_own_packages(prefix)
    for directory in (prefix.parent, prefix.parent.parent):
        with contextlib.suppress(OSError):
            directory.rmdir()


def remove_socket_files(info: Mapping[str, Any]) -> Path | None:
    """Remove the ipc socket files connection info `info` names (a dead process's: a client
    that connects to one it left is refused, and does not try again once a new process binds
    there); return their prefix (None: not ipc)."""
    if info.get("transport") != "ipc" or not info.get("ip"):
        return None
    prefix = Path(str(info["ip"]))
    for socket in prefix.parent.glob(f"{prefix.name}-*"):
        with contextlib.suppress(OSError):
            socket.unlink()
    return prefix


def connection_info_in(connection: Path) -> dict[str, Any]:
    """Return the connection info a connection file holds ({} when it is gone or unreadable)."""
    try:
        info = json.loads(connection.read_bytes())
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def last_lines(path: Path, count: int, since: int = 0) -> str:
    """Return the last `count` lines of a file written after its first `since` bytes ("" when
    it is missing)."""
    try:
        with path.open("rb") as f:
            f.seek(max(since, path.stat().st_size - 8192))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip("\n").splitlines()[-count:])
