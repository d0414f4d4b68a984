"""How the gateway reaches a local kernel's ZMQ channels, chosen here for each launch.

- `ipc`: socket files in a dir of the kernel's own, for ipykernel (no port another process can
  take between their choice and the kernel's bind, and no port at all inside a sandbox);
- `tcp`: ports on loopback, as a stock Jupyter Server gives every kernel, for a kernel that
  takes nothing else (ipymini, Deno and xeus-python refuse ipc connection files) when it shares
  the host's network;
- `relayed`: for such a kernel in a network namespace of its own, fixed ports on that
  namespace's loopback, which no other kernel and no other user can reach; the gateway's side
  stays ipc files, joined to the ports by the relay inside (`sandbox/network/port_relay.py`).

The kernel spec decides (an ipykernel command takes ipc), so no kernel pays a failed first start.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from jupyter_core.paths import secure_write

from loomgate.gateway.residency.kernel_command import runs_ipykernel

Transport = Literal["ipc", "tcp", "relayed"]

# Inside a namespace of its own nothing else listens (but the proxy's bridge, on 3128); below
# the ephemeral range (32768 and up), which the relay's own connections take their ports from.
RELAYED_PORTS = {"shell": 9001, "iopub": 9002, "stdin": 9003, "control": 9004, "hb": 9005}
LOOPBACK = "127.0.0.1"
RELAYED_CONNECTION = "connection.json"  # a relayed kernel's own connection file, in its dir


def choose(argv: Sequence[str], *, own_network: bool) -> Transport:
    """Return the transport of a kernel whose spec runs `argv`, in a network namespace of its
    own or not."""
    if runs_ipykernel(argv):
        return "ipc"
    return "relayed" if own_network else "tcp"


def prepare(km: Any, transport: Transport, ipc_prefix: str) -> None:
    """Set kernel manager `km`'s side of `transport` before its connection file is written:
    ipc files at `ipc_prefix` (also for a relayed kernel), or loopback TCP ports (those of a
    restart kept, as a client's connection expects)."""
    if transport == "tcp":
        if km.transport != "tcp":  # a kernel that had ipc files before gets new ports
            km.shell_port = km.iopub_port = km.stdin_port = km.hb_port = km.control_port = 0
        km.transport = "tcp"
        km.ip = LOOPBACK
        return
    if km.transport == "ipc" and km.ip == ipc_prefix:
        return  # chosen already (a restart): the same files
    km.transport = "ipc"
    km.ip = ipc_prefix
    km.cache_ports = False
    km.shell_port = km.iopub_port = km.stdin_port = km.hb_port = km.control_port = 0


def write_relayed_connection(km: Any, kernel_dir: Path) -> Path:
    """Write the connection file a relayed kernel reads (its fixed ports on its own loopback,
    the key and scheme of `km`'s), 0600 in `kernel_dir`; return its path."""
    info = json.loads(Path(km.connection_file).read_text(encoding="utf-8"))
    info.update(transport="tcp", ip=LOOPBACK)
    info.update({f"{channel}_port": port for channel, port in RELAYED_PORTS.items()})
    path = kernel_dir / RELAYED_CONNECTION
    with secure_write(str(path)) as file:
        file.write(json.dumps(info, indent=2))
    return path


def relay_routes(km: Any) -> list[tuple[Path, int]]:
    """Return where the relay listens for each channel of relayed kernel manager `km` (its ipc
    socket files) and the kernel's port it joins it to."""
    return [
        (Path(f"{km.ip}-{own}"), RELAYED_PORTS[channel])
        for channel, own in channel_ports(km).items()
    ]


def kernel_ports(km: Any) -> tuple[int, ...]:
    """Return the TCP ports kernel manager `km`'s kernel listens on (its connection file's)."""
    return tuple(channel_ports(km).values())


def channel_ports(km: Any) -> dict[str, int]:
    """Return kernel manager `km`'s port (or ipc file number) of each channel."""
    return {
        "shell": int(km.shell_port),
        "iopub": int(km.iopub_port),
        "stdin": int(km.stdin_port),
        "control": int(km.control_port),
        "hb": int(km.hb_port),
    }
