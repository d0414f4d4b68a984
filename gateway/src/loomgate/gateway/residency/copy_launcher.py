"""The launcher of an ipykernel kernel that can be copied: run by path in the kernel's own
Python (`python copy_launcher.py -f CONNECTION_FILE`) in place of `-m ipykernel_launcher`, it
imports nothing of loomgate.

A copy is a fork of the kernel's process made by a cell (kernels/kernel_copy.py): in the child,
the cell names a connection file in `sys.loomgate_become` and stops the kernel's loop, so that
`IPKernelApp.start()` returns here, and the child starts a new kernel on that file around the
same InteractiveShell, its namespace whole.

The private uses of ipykernel live here alone (tests/gateway/copies/test_kernel_copy.py fails
without each): the application's and the kernel's singletons cleared
(`IPKernelApp.clear_instance`, `IPythonKernel.clear_instance`), the streams ipykernel put in
sys.stdout and sys.stderr (they send through the origin's IOPub thread) and a new asyncio loop
(the inherited one is the origin's, abandoned, never closed). The InteractiveShell singleton is
kept on purpose: the new kernel takes it, namespace and all.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import sys
from pathlib import Path
from typing import Any

# Run by path, Python put this file's dir first on sys.path, where `-m ipykernel_launcher` puts
# the working dir: a cell's `import kernel` must not find a module of loomgate's.
if sys.path and sys.path[0] == str(Path(__file__).resolve().parent):
    sys.path[0] = str(Path.cwd())

import asyncio

from ipykernel.ipkernel import IPythonKernel
from ipykernel.kernelapp import IPKernelApp

BECOME = "loomgate_become"  # the attribute of `sys` a copy's cell sets: its connection file
# The attribute of `sys` that keeps how this kernel was started (its command and environment as
# they were then), which a starter of fresh kernels (kernels/kernel_copy.py) starts again.
LAUNCH = "loomgate_launch"
# The attribute of `sys` that keeps the process's own stdout and stderr (its log), which ipykernel
# replaces by pipes its own thread reads: a copy has no such thread, and its origin's may be gone
# (a write would block once the pipe is full). A copy's first act is to take them back.
OUTPUT = "loomgate_output"
# The attribute of `sys` that names the kernel's open sockets (`open_sockets`), asked before a
# copy is made.
SOCKETS = "loomgate_sockets"
KERNEL_SOCKETS: set[str] = set()  # the sockets ipykernel itself opened (a copy's: its origin's too)


def socket_fds() -> dict[int, str]:
    """Return the descriptors of the sockets this process holds open, with each socket's inode
    (none where there is no /proc)."""
    found = {}
    with contextlib.suppress(OSError):
        for fd in Path("/proc/self/fd").iterdir():
            with contextlib.suppress(OSError):
                target = str(fd.readlink())
                if target.startswith("socket:["):
                    found[int(fd.name)] = target[8:-1]
    return found


def socket_inodes() -> set[str]:
    """Return the inodes of the sockets this process holds open."""
    return set(socket_fds().values())


def open_sockets() -> list[str]:
    """Return the TCP and UDP sockets the kernel's code holds open, in words (a copy shares them
    with it), without the kernel's own (ipykernel binds a ZMQ socket on loopback TCP for its
    debugger); each asked of its descriptor (/proc/net walks the host's whole table: ms each)."""
    described = (
        socket_words(fd) for fd, inode in socket_fds().items() if inode not in KERNEL_SOCKETS
    )
    return [words for words in described if words is not None]


def socket_words(fd: int) -> str | None:
    """Return descriptor `fd`'s TCP or UDP socket in words (`tcp listening on 127.0.0.1:8080`,
    `udp6 [::1]:53 to [::1]:5353`); None for another kind, a TCP socket neither listening nor
    connected, or a UDP socket not bound."""
    blocking = os.get_blocking(fd)  # a socket object made on it may change it (a default timeout)
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return None
    try:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return None
        kind = "tcp" if sock.type == socket.SOCK_STREAM else "udp"
        kind += "6" if sock.family == socket.AF_INET6 else ""
        bound = sock.getsockname()
        local = address(bound)
        with contextlib.suppress(OSError):
            return f"{kind} {local} to {address(sock.getpeername())}"
        if sock.type == socket.SOCK_STREAM:
            listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            return f"{kind} listening on {local}" if listening else None
        return f"{kind} on {local}" if bound[1] else None
    except OSError:
        return None
    finally:
        sock.detach()  # the descriptor stays the kernel's, open
        os.set_blocking(fd, blocking)


def address(bound: tuple[Any, ...]) -> str:
    """Return a socket's address (`getsockname()`'s) as `127.0.0.1:8080` or `[::1]:443`."""
    ip = ipaddress.ip_address(bound[0].split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # an IPv4 peer of a dual-stack socket
    return f"[{ip}]:{bound[1]}" if ip.version == 6 else f"{ip}:{bound[1]}"


def become(connection_file: str) -> None:
    """Start a kernel on `connection_file` around this process's InteractiveShell (a forked
    child whose inherited kernel loop has stopped)."""
    # The origin's streams send through its IOPub thread, which a copy has not: the new kernel
    # makes its own around the process's own (its logging too).
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    IPKernelApp.clear_instance()
    IPythonKernel.clear_instance()
    asyncio.set_event_loop(asyncio.new_event_loop())
    app = IPKernelApp.instance()
    # No parent to watch: a copy's parent is its origin or a checkpoint, never the process that
    # started the kernel (JPY_PARENT_PID), and either may end first.
    app.initialize(["-f", connection_file, "--IPKernelApp.parent_handle=0"])
    KERNEL_SOCKETS.update(socket_inodes())
    app.start()


def main() -> None:
    """Run the kernel; a forked child that was asked to become a copy starts it once the
    kernel's loop has stopped."""
    setattr(sys, LAUNCH, ([sys.executable, *sys.orig_argv[1:]], dict(os.environ)))
    setattr(sys, OUTPUT, (os.dup(1), os.dup(2)))
    setattr(sys, SOCKETS, open_sockets)
    app = IPKernelApp.instance()
    app.initialize(sys.argv[1:])
    KERNEL_SOCKETS.update(socket_inodes())
    app.start()
    while (target := getattr(sys, BECOME, None)) is not None:
        setattr(sys, BECOME, None)
        become(target)


if __name__ == "__main__":
    main()
