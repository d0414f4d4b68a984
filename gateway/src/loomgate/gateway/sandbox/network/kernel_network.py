"""A confined kernel's network, both ways across its border: its way out (where its proxy
listens: a unix socket in the kernel's own net dir, bound into its sandbox, or a loopback port
where it shares the host's network; the bridge its clients reach inside its network namespace,
and the variables that point them there) and the way in to a kernel that takes only TCP (the
relay inside from the gateway's unix sockets to its ports). The bridge and the relay run from
copies of their scripts in the net dir, which every sandbox sees."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "BRIDGE_PORT",
    "UNSET",
    "bridge_script",
    "bridged",
    "net_dir",
    "place_scripts",
    "proxy_environment",
    "proxy_socket",
    "relay_script",
    "relayed",
]

# Inside the kernel's own network namespace nothing else listens: any port would do.
BRIDGE_PORT = 3128
NAME = "loomgate network bridge"  # the shell's $0: begins its own error lines
# The bridge runs in the background of a subshell that exits at once, so that the sandbox's
# init, not the kernel, is its parent and reaps it (a non-interactive shell's background job
# ignores SIGINT: an interrupt of the kernel's group leaves it); it serves while this shell's
# process ($$), which then becomes the kernel, lives: the sandbox ends with its last process.
SCRIPT = '( "$1" -I -S "$2" "$3" "$4" --while $$ & ); shift 4; exec "$@"'
# The relay, started the same way, with its routes after the script (relay_shell()).
RELAY_NAME = "loomgate port relay"
# A proxy exception list from the gateway's environment would send a named local service
# ("127.0.0.1:8080") past the proxy, into a namespace where nothing listens.
UNSET = ("NO_PROXY", "no_proxy")
BRIDGE_SCRIPT = "bridge.py"
RELAY_SCRIPT = "port_relay.py"


def net_dir(kernel_dir: Path) -> Path:
    """Return the dir holding the kernel's proxy socket and the copies of the bridge's and the
    relay's scripts, bound read-only into its sandbox (a read-only mount does not stop a
    connect; the socket's path is the gateway's to replace)."""
    return kernel_dir / "net"


def place_scripts(kernel_dir: Path) -> None:
    """Copy the bridge's and the relay's scripts into the kernel's net dir (made as needed):
    where the gateway's own lie, a sandbox may not see them (a clone under the host's /tmp,
    which each sandbox replaces with its own, runs its gateway's from there)."""
    directory = net_dir(kernel_dir)
    directory.mkdir(mode=0o700, exist_ok=True)
    for name in (BRIDGE_SCRIPT, RELAY_SCRIPT):
        copy = directory / f".{name}.{os.getpid()}.tmp"
        shutil.copyfile(Path(__file__).with_name(name), copy)
        copy.replace(directory / name)  # a start of the kernel's may be reading the last one


def proxy_socket(kernel_dir: Path) -> Path:
    """Return the unix socket the gateway's proxy for this kernel listens on."""
    return net_dir(kernel_dir) / "proxy.sock"


def proxy_environment(port: int) -> dict[str, str]:
    """Return the variables that send a kernel's HTTP(S) clients (pip, uv, requests, httpx,
    urllib, curl, git) through the proxy on loopback `port`; curl reads the lower-case ones."""
    url = f"http://127.0.0.1:{port}"
    names = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
    return {name: url for upper in names for name in (upper, upper.lower())}


def bridged(
    kernel_cmd: Sequence[str], *, python: str, kernel_dir: Path, port: int = BRIDGE_PORT
) -> list[str]:
    """Return the command that starts the bridge from loopback `port` to the kernel's proxy
    socket in the background, with `python`, and then runs `kernel_cmd` in its place."""
    bridge = [python, bridge_script(kernel_dir), str(proxy_socket(kernel_dir)), str(port)]
    return ["/bin/sh", "-c", SCRIPT, NAME, *bridge, *kernel_cmd]


def bridge_script(kernel_dir: Path) -> str:
    """Return the path of the kernel's copy of the bridge's script (place_scripts()), run by
    path: it imports nothing of loomgate, whose packages the sandbox's Python (-I -S) need not
    see."""
    return str(net_dir(kernel_dir) / BRIDGE_SCRIPT)


def relayed(
    kernel_cmd: Sequence[str],
    *,
    python: str,
    kernel_dir: Path,
    routes: Sequence[tuple[Path, int]],
) -> list[str]:
    """Return the command that starts the relay from each unix socket of `routes` to its TCP
    port on the namespace's loopback in the background, with `python`, and then runs
    `kernel_cmd` in its place."""
    pairs = [f"{path}={port}" for path, port in routes]
    relay = [python, relay_script(kernel_dir), *pairs]
    return ["/bin/sh", "-c", relay_shell(len(pairs)), RELAY_NAME, *relay, *kernel_cmd]


def relay_shell(routes: int) -> str:
    """Return the shell script that starts the relay with its `routes` arguments (after its
    Python and script) and then execs the rest: only numbers are written into it."""
    args = " ".join(f'"${{{index}}}"' for index in range(3, 3 + routes))
    return f'( "$1" -I -S "$2" --while $$ {args} & ); shift {2 + routes}; exec "$@"'


def relay_script(kernel_dir: Path) -> str:
    """Return the path of the kernel's copy of the relay's script (standalone, as the
    bridge's)."""
    return str(net_dir(kernel_dir) / RELAY_SCRIPT)
