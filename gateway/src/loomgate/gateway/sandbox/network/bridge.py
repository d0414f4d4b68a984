"""The bridge inside a confined kernel's network namespace: it listens on 127.0.0.1:PORT (and
[::1]:PORT where the namespace has IPv6 loopback) and hands each connection it accepts to the
gateway's proxy, a unix socket bound into the sandbox: it connects there, sends one byte with
the connection's fd (SCM_RIGHTS), and closes its own copy and the unix connection. The proxy
serves that socket itself, so the bytes pass through one relay, the gateway's; nothing comes
back this way.

    python -I -S bridge.py SOCKET_PATH PORT

Standalone on purpose: any Python from 3.8 runs it, stdlib only, without loomgate (the kernel
sees a read-only file system, and -I -S keeps its site and environment out). While the socket
is missing or refuses (the gateway restarting, or its backlog full), a client is reset at
once; the next one tries again, so connections work as soon as the next gateway has made its
socket. SIGINT is ignored (a kernel's interrupt reaches its whole process group); it dies with
the process that started it (PR_SET_PDEATHSIG, which follows the starting thread: start it
from a thread that lives as long as the kernel), or, with `--while PID`,
while the kernel's process lives. Its stdout is closed once it listens, so a
starter can wait for that. One thread per listener, and nothing to wait on: a non-blocking unix
connect is made or refused at once, and one byte fits a new connection's buffer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
# Started apart from the kernel (a child of the sandbox's init, which reaps it: a child of the
# kernel would stay a zombie ipykernel waits on at shutdown), it serves while the kernel's
# process, named by pid, lives: the sandbox's init ends only once its last process has.
WHILE = "--while"
USAGE = f"usage: python -I -S bridge.py SOCKET_PATH PORT [{WHILE} PID]"


def main(argv: list[str]) -> int:
    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    kept_by = argv[4] if argv[3:4] == [WHILE] and len(argv) == 5 else None
    if kept_by is None:
        die_with(parent)
    elif kept_by.isdigit():
        serve_while(int(kept_by))
    flags = 0 if kept_by is None else 2
    valid = len(argv) == 3 + flags and (kept_by is None or kept_by.isdigit())
    if not valid or not argv[2].isdigit() or not 0 < int(argv[2]) < 65536:
        print(USAGE, file=sys.stderr)
        return 2
    path, port = argv[1], int(argv[2])
    try:
        listeners = [listener(socket.AF_INET, "127.0.0.1", port)]
    except OSError as error:
        print(f"bridge: cannot listen on 127.0.0.1:{port}: {error.strerror}", file=sys.stderr)
        return 1
    try:
        listeners.append(listener(socket.AF_INET6, "::1", port))
    except OSError as error:
        if error.errno not in (97, 99):  # EAFNOSUPPORT, EADDRNOTAVAIL: no IPv6 loopback
            print(f"bridge: cannot listen on [::1]:{port}: {error.strerror}", file=sys.stderr)
            return 1
    listening()
    for extra in listeners[1:]:
        threading.Thread(target=accept, args=(extra, path), daemon=True).start()
    accept(listeners[0], path)
    return 0


def die_with(parent: int) -> None:
    """End this process when `parent` ends: SIGKILL from the kernel, else a watching thread."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        armed = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (ImportError, OSError, AttributeError):
        armed = False
    if not armed:
        threading.Thread(target=watch, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # it ended before the signal was armed
        os._exit(0)


def serve_while(pid: int) -> None:
    """End this process when process `pid` ends (at once if it has): a pidfd where there is
    one, else a look every second."""
    pidfd: int | None = None
    if sys.platform == "linux" and sys.version_info >= (3, 9):  # where there are pidfds
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            os._exit(0)
        except OSError:  # a kernel before 5.3
            pass
    if pidfd is None:
        threading.Thread(target=poll_pid, args=(pid,), daemon=True).start()
        return
    threading.Thread(target=wait_readable, args=(pidfd,), daemon=True).start()


def wait_readable(fd: int) -> None:
    """Exit once `fd` (a pidfd) is readable: its process has ended."""
    import select

    select.select([fd], [], [])
    os._exit(0)


def poll_pid(pid: int) -> None:
    """Exit once process `pid` is gone."""
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass
        time.sleep(1.0)


def watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


def listener(family: socket.AddressFamily, host: str, port: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(512)
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


def accept(listening_socket: socket.socket, path: str) -> None:
    while True:
        try:
            client, _ = listening_socket.accept()
        except OSError:
            time.sleep(0.1)  # out of file descriptors or memory: wait for some to be freed
            continue
        hand_over(client, path)


def hand_over(client: socket.socket, path: str) -> None:
    """Send `client` to the proxy at `path` (one byte, its fd in SCM_RIGHTS) and close this
    process's copy; reset it when the proxy cannot be reached."""
    gateway = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        gateway.setblocking(False)  # a unix connect is made or refused at once, never waits
        gateway.connect(path)
        fd = struct.pack("i", client.fileno())
        gateway.sendmsg([b"\0"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fd)])
    except OSError:
        reset(client)
    else:
        client.close()
    finally:
        gateway.close()


def reset(sock: socket.socket) -> None:
    """Close `sock` with a reset, so its client sees at once that nothing is behind it."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
