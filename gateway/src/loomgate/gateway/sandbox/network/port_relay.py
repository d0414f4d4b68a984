"""The relay inside a confined kernel's network namespace to a kernel that takes only TCP: it
listens on unix sockets in the kernel's ipc dir (which both sides of the sandbox see) and joins
each connection the gateway makes there to the kernel's port on the namespace's loopback, byte
for byte (ZMQ's protocol is the same over either), so the gateway reaches the kernel's channels
and nothing outside the namespace reaches its ports.

    python -I -S port_relay.py --while PID SOCKET_PATH=PORT [SOCKET_PATH=PORT ...]

Standalone on purpose, as bridge.py: any Python from 3.8 runs it, stdlib only (and so it
repeats the bridge's `serve_while` and `listening`: `-I` puts neither script's dir on the
other's path, and the sandbox need not see loomgate's packages). It serves while
process PID (the kernel) lives, and ignores SIGINT (an interrupt reaches the kernel's whole
process group). A connection made before the kernel listens waits for its port (up to
CONNECT_TIMEOUT); one the kernel's side ends is ended on the gateway's side, and the reverse.
Its stdout is closed once every socket listens, so a starter can wait for that. Two threads per
connection: a kernel has five channels and a few clients.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

WHILE = "--while"
USAGE = f"usage: python -I -S port_relay.py {WHILE} PID SOCKET_PATH=PORT [SOCKET_PATH=PORT ...]"
CONNECT_TIMEOUT = 60.0  # how long a connection waits for the kernel to listen on its port
CONNECT_RETRY = 0.01
CHUNK = 1 << 16


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pairs = parse(argv[1:])
    if pairs is None:
        print(USAGE, file=sys.stderr)
        return 2
    kernel, routes = pairs
    serve_while(kernel)
    listeners = []
    for path, port in routes:
        try:
            listeners.append((listen(path), port))
        except OSError as error:
            print(f"port relay: cannot listen on {path}: {error.strerror}", file=sys.stderr)
            return 1
    listening()
    for sock, port in listeners[1:]:
        threading.Thread(target=accept, args=(sock, port), daemon=True).start()
    accept(*listeners[0])
    return 0


def parse(args: list[str]) -> tuple[int, list[tuple[str, int]]] | None:
    """Return the kernel's pid and the (socket path, port) routes of `args` (None: malformed)."""
    if len(args) < 3 or args[0] != WHILE or not args[1].isdigit():
        return None
    routes = []
    for arg in args[2:]:
        path, _, port = arg.rpartition("=")
        if not path or not port.isdigit() or not 0 < int(port) < 65536:
            return None
        routes.append((path, int(port)))
    return int(args[1]), routes


def serve_while(pid: int) -> None:
    """End this process when process `pid` ends (at once if it has): a pidfd where there is
    one, else a look every second."""
    pidfd = None
    if sys.platform == "linux" and sys.version_info >= (3, 9):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            os._exit(0)
        except OSError:  # a kernel before 5.3
            pass
    if pidfd is None:
        threading.Thread(target=poll_pid, args=(pid,), daemon=True).start()
    else:
        threading.Thread(target=wait_readable, args=(pidfd,), daemon=True).start()


def wait_readable(fd: int) -> None:
    import select

    select.select([fd], [], [])
    os._exit(0)


def poll_pid(pid: int) -> None:
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass
        time.sleep(1.0)


def listen(path: str) -> socket.socket:
    """Return a unix socket listening at `path` (one a start before left there is replaced)."""
    with contextlib.suppress(FileNotFoundError):
        Path(path).unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        Path(path).chmod(0o600)
        sock.listen(64)
    except OSError:
        sock.close()
        raise
    return sock


def listening() -> None:
    """Close stdout (/dev/null in its place): the sign for a starter that waits on a pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        os.close(1)
        return
    os.dup2(devnull, 1)
    os.close(devnull)


def accept(listener: socket.socket, port: int) -> None:
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            time.sleep(0.1)  # out of file descriptors or memory: wait for some to be freed
            continue
        threading.Thread(target=join, args=(client, port), daemon=True).start()


def join(client: socket.socket, port: int) -> None:
    """Connect to the kernel's `port` (waiting for it to listen) and relay both ways."""
    kernel = connect(port)
    if kernel is None:
        client.close()
        return
    back = threading.Thread(target=pump, args=(kernel, client), daemon=True)
    back.start()
    pump(client, kernel)
    back.join()
    client.close()
    kernel.close()


def connect(port: int) -> socket.socket | None:
    """Return a connection to the kernel's `port` on loopback (None: nothing listened there
    within CONNECT_TIMEOUT)."""
    deadline = time.monotonic() + CONNECT_TIMEOUT
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.connect(("127.0.0.1", port))
        except OSError:
            sock.close()
            if time.monotonic() >= deadline:
                return None
            time.sleep(CONNECT_RETRY)
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


def pump(source: socket.socket, target: socket.socket) -> None:
    """Copy what `source` sends to `target` until it ends, then end `target`'s sending side
    (on an error, both directions end)."""
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    try:
        while True:
            count = source.recv_into(buffer)
            if not count:
                break
            target.sendall(view[:count])
    except OSError:
        with contextlib.suppress(OSError):
            source.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
