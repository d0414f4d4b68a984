"""The launcher of an ipykernel kernel that can be copied: run by path in the kernel's own
Python (`python copy_launcher.py -f CONNECTION_FILE`) in place of `-m ipykernel_launcher`, it
imports nothing of loomgate.

A copy is a fork of the kernel's process made by a cell (kernels/kernel_copy.py): in the child,
the cell names a connection file in `sys.loomgate_become` and stops the kernel's loop, so that
`IPKernelApp.start()` returns here, and the child starts a new kernel on that file around the
same InteractiveShell, its namespace whole.

The private uses of ipykernel live here alone (tests/gateway/test_kernel_copy.py fails without
each): the application's and the kernel's singletons cleared (`IPKernelApp.clear_instance`,
`IPythonKernel.clear_instance`), the streams ipykernel put in sys.stdout and sys.stderr (they
send through the origin's IOPub thread) and a new asyncio loop (the inherited one is the
origin's, abandoned, never closed). The InteractiveShell singleton is kept on purpose: the new
kernel takes it, namespace and all.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import sys
from pathlib import Path

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


def socket_inodes() -> set[str]:
    """Return the inodes of the sockets this process holds open (none where there is no /proc)."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in Path("/proc/self/fd").iterdir():
            with contextlib.suppress(OSError):
                target = str(fd.readlink())
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    return inodes


def open_sockets() -> list[str]:
    """Return the TCP and UDP sockets the kernel's code holds open, in words (a copy shares them
    with it): from /proc, as the kernel's own network namespace numbers them, without the
    kernel's own (ipykernel binds a ZMQ socket on loopback TCP for its debugger)."""
    inodes = socket_inodes() - KERNEL_SOCKETS
    found = []
    for kind in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = Path(f"/proc/self/net/{kind}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[9] not in inodes:
                continue
            local, remote = address(fields[1]), address(fields[2])
            if remote.endswith(":0"):  # listening (TCP), or unconnected (UDP)
                found.append(f"{kind} {'listening on' if kind.startswith('tcp') else 'on'} {local}")
            else:
                found.append(f"{kind} {local} to {remote}")
    return found


def address(hexadecimal: str) -> str:
    """Return an address as /proc/net writes it (`0100007F:1F90`) as `127.0.0.1:8080`."""
    host, port = hexadecimal.split(":")
    raw = bytes.fromhex(host)
    # Each 32-bit word is in the machine's order (little-endian on every Linux loomgate runs on).
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # an IPv4 peer of a dual-stack socket
    return f"[{ip}]:{int(port, 16)}" if ip.version == 6 else f"{ip}:{int(port, 16)}"


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
