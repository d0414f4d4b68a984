"""The sandbox's bridge (sandbox/network/bridge.py) started as a kernel starts it, a real process
run by `python -I -S`; a hand-over sent as a sandbox could send it, whatever it carries; the short
dirs under /var/tmp its unix sockets live in (a socket's path must fit in 107 bytes); servers on
127.0.0.1 for the network tests to reach; this process's open fds."""

from __future__ import annotations

import gc
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from loomgate.gateway.sandbox.network import bridge
from tests.support.gateways import free_port

BRIDGE = bridge.__file__


def bridge_command(socket_path: Path, port: int) -> list[str]:
    """Return the command a kernel runs for its bridge."""
    return [sys.executable, "-I", "-S", BRIDGE, str(socket_path), str(port)]


@contextmanager
def running_bridge(
    socket_path: Path, port: int | None = None, *, wrapper: Sequence[str] = ()
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Yield a bridge to `socket_path` once it listens (it closes its stdout then), and its
    port; `wrapper`: a command it runs under (bwrap). Killed at the end."""
    port = port or free_port()
    process = subprocess.Popen(
        [*wrapper, *bridge_command(socket_path, port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None and process.stdout.read() == b""
        assert process.poll() is None, process.communicate()[1]
        yield process, port
    finally:
        process.kill()
        process.communicate()


def hand_over(socket_path: Path, fds: Sequence[int], data: bytes = b"\0") -> socket.socket:
    """Connect to `socket_path` and send `data` with `fds` in SCM_RIGHTS (the bridge sends one
    byte with one fd); return the unix connection, blocking, its sending side ended."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(socket_path))
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))]
        conn.sendmsg([data], rights if fds else [])
        conn.shutdown(socket.SHUT_WR)
    except BaseException:
        conn.close()
        raise
    return conn


def open_fds() -> set[str]:
    """Return this process's open file descriptors, once garbage (an earlier test's, whose
    collection would close some later) is collected."""
    gc.collect()
    return {entry.name for entry in Path("/proc/self/fd").iterdir()}


@contextmanager
def short_dir() -> Iterator[Path]:
    """Yield a new dir under /var/tmp with a short path, removed at the end."""
    path = Path(tempfile.mkdtemp(prefix="lgb-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# A TCP server on 127.0.0.1 that echoes until EOF, then says b"bye"; it prints its port.
ECHO = """
import socket, threading
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
def echo(sock):
    with sock:
        while data := sock.recv(65536):
            sock.sendall(data)
        sock.sendall(b"bye")
while True:
    sock, _ = listener.accept()
    threading.Thread(target=echo, args=(sock,), daemon=True).start()
"""


@contextmanager
def served(command: list[str]) -> Iterator[int]:
    """Yield the port a server process prints on its first line (alone, or after "port"),
    stopping it after."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert process.stdout is not None
        found = re.search(rb"^(\d+)$|port (\d+)", process.stdout.readline().strip())
        assert found is not None
        yield int(found.group(1) or found.group(2))
    finally:
        process.kill()
        process.communicate()


def file_server(directory: Path) -> list[str]:
    """Return the command of an HTTP server for `directory` on 127.0.0.1 (for served())."""
    return [sys.executable, "-u", "-m", "http.server", "-b", "127.0.0.1", "-d", str(directory), "0"]


def echo_server() -> list[str]:
    """Return the command of the ECHO server (for served())."""
    return [sys.executable, "-c", ECHO]
