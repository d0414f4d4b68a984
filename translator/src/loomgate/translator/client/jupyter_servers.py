"""The person's running Jupyter servers (JupyterLab, Notebook, Jupyter Server), found the way
`jupyter server list` finds them, and the kernels of those that run loomgate's extension."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import anyio

from loomgate.shared import wire
from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.processes import process_alive
from loomgate.translator.client.target import JUPYTER_PREFIX, GatewayTarget

EXTENSION = "loomgate.gateway"
# How long one of the person's servers may take to say which kernels it runs (a hung server
# must not hold up a listing of the others).
ASK_TIMEOUT = 5.0
NO_TOKEN = "it signs in with a password, not a token, so loomgate cannot reach its kernels"
EXTENSION_CONFIG = f"jupyter_server_config.d/{EXTENSION}.json"
EXTENSION_SETTINGS = "LoomgateExtension"  # the extension's traitlets config section


Answer = TypeVar("Answer")


@dataclass(frozen=True)
class JupyterServer:
    """A running Jupyter server on this machine, from its runtime file (never shows its token)."""

    url: str
    token: str = field(repr=False)
    pid: int
    port: int
    root_dir: str
    version: str

    @property
    def name(self) -> str:
        """Return the name a tool or the CLI calls this server by."""
        return f"{JUPYTER_PREFIX}{self.port}"

    def target(self) -> GatewayTarget:
        """Return this server as a gateway to talk to."""
        return GatewayTarget(self.url, self.token, True, self.name, False)


@dataclass(frozen=True)
class ServerKernels:
    """A Jupyter server and its kernels (None when it runs no loomgate extension)."""

    server: JupyterServer
    kernels: list[wire.Kernel] | None
    problem: str = ""  # why its kernels are unknown, when it could not be asked


# Opens (or reuses) a checked client of a server: the conversation's or the CLI's own.
Opener = Callable[[GatewayTarget], Awaitable[GatewayClient]]


def jupyter_dir(variable: str, linux: Path, mac: Path) -> Path:
    """Return $variable if set, else this platform's default."""
    explicit = os.environ.get(variable)
    if explicit:
        return Path(explicit).expanduser()
    return mac if sys.platform == "darwin" else linux


def runtime_dir() -> Path:
    """Return Jupyter's runtime dir, where each running server writes its url and token."""
    if os.environ.get("JUPYTER_RUNTIME_DIR"):
        return Path(os.environ["JUPYTER_RUNTIME_DIR"]).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    linux = (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share") / "jupyter"
    data = jupyter_dir("JUPYTER_DATA_DIR", linux, Path.home() / "Library" / "Jupyter")
    return data / "runtime"


def config_dir() -> Path:
    """Return the person's Jupyter config dir ($JUPYTER_CONFIG_DIR, else ~/.jupyter)."""
    home = Path.home() / ".jupyter"
    return jupyter_dir("JUPYTER_CONFIG_DIR", home, home)


def running_servers(
    directory: Path | None = None, *, except_url: str | None = None
) -> list[JupyterServer]:
    """Return the Jupyter servers whose runtime files say they run (their process exists),
    but the one at `except_url` (a gateway already asked)."""
    directory = directory or runtime_dir()
    servers: dict[int, JupyterServer] = {}
    files = sorted(directory.glob("jpserver-*.json")) + sorted(directory.glob("nbserver-*.json"))
    for path in files:
        server = read_runtime_file(path)
        if server is None or server.url == except_url:
            continue
        if server.port not in servers and process_alive(server.pid):
            servers[server.port] = server
    return sorted(servers.values(), key=lambda s: s.port)


def read_runtime_file(path: Path) -> JupyterServer | None:
    """Return the server a runtime file describes (None if it is unreadable or incomplete)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return JupyterServer(
            url=str(data["url"]).rstrip("/"),
            token=str(data.get("token") or ""),
            pid=int(data["pid"]),
            port=int(data["port"]),
            root_dir=str(data.get("root_dir") or data.get("notebook_dir") or ""),
            version=str(data.get("version", "")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def server_named(name: str) -> JupyterServer | None:
    """Return the running server called `name` (jupyter:PORT), if any."""
    return next((s for s in running_servers() if s.name == name), None)


def is_notebook_path(ref: str) -> bool:
    """Return whether a kernel reference can only mean a notebook or console path."""
    return "/" in ref or ref.endswith(".ipynb")


async def ask(
    server: JupyterServer,
    open_client: Opener,
    question: Callable[[GatewayClient], Awaitable[Answer]],
) -> tuple[GatewayClient, Answer]:
    """Return a client of `server` and its answer to `question`, within ASK_TIMEOUT
    (GatewayError, or TimeoutError when it does not answer)."""
    with anyio.fail_after(ASK_TIMEOUT):
        client = await open_client(server.target())
        return client, await question(client)


async def list_server_kernels(
    servers: list[JupyterServer], open_client: Opener
) -> list[ServerKernels]:
    """Return each server with its kernels (None for a server without loomgate's extension)."""

    async def one(server: JupyterServer) -> ServerKernels:
        if not server.token:
            return ServerKernels(server, None, problem=NO_TOKEN)
        try:
            _, kernels = await ask(server, open_client, lambda client: client.list_kernels())
        except GatewayError as e:
            return ServerKernels(server, None, problem="" if e.status == 404 else str(e))
        except TimeoutError:
            return ServerKernels(server, None, problem=f"no answer within {ASK_TIMEOUT:g} s")
        return ServerKernels(server, kernels)

    return list(await asyncio.gather(*(one(server) for server in servers)))


async def find_in_servers(
    ref: str, servers: list[JupyterServer], open_client: Opener
) -> list[tuple[GatewayClient, wire.Kernel]]:
    """Return the live kernels `ref` names (a notebook path or its tail, a name, an id prefix)
    on the servers that run loomgate's extension."""

    async def one(server: JupyterServer) -> tuple[GatewayClient, wire.Kernel] | None:
        if not server.token:
            return None
        try:
            client, kernel = await ask(server, open_client, lambda c: c.get_kernel(ref))
        except (GatewayError, TimeoutError):
            return None  # no extension, not there, or not answering: not a match
        return (client, kernel) if kernel["alive"] else None

    found = await asyncio.gather(*(one(server) for server in servers))
    return [match for match in found if match is not None]


def config_path() -> list[Path]:
    """Return the dirs Jupyter reads its config from, the one that decides first: jupyter_core's
    search path where Jupyter is installed beside loomgate, else the person's config dir."""
    if importlib.util.find_spec("jupyter_core") is None:
        return [config_dir()]
    from jupyter_core.paths import jupyter_config_path  # only where Jupyter is installed

    return [Path(directory) for directory in jupyter_config_path()]


def listed_state(directory: Path) -> bool | None:
    """Return whether `directory`'s config lists loomgate's extension enabled (None: not listed)."""
    try:
        config = json.loads((directory / EXTENSION_CONFIG).read_text(encoding="utf-8"))
        return bool(config["ServerApp"]["jpserver_extensions"][EXTENSION])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def enabled_config(path: list[Path] | None = None) -> Path:
    """Return the config file that decides whether loomgate's extension is on: the first on
    Jupyter's path that lists it, else the person's own."""
    deciding = next((d for d in path or config_path() if listed_state(d) is not None), None)
    return (deciding or config_dir()) / EXTENSION_CONFIG


def set_enabled(
    enabled: bool,
    path: list[Path] | None = None,
    person: Path | None = None,
    *,
    live_cells: bool = True,
) -> list[Path]:
    """Enable or disable loomgate's extension for the person's Jupyter servers, with the
    agent's cells shown live in open notebooks unless `live_cells` is False; return the files
    written.

    It is recorded in the person's config dir, as `jupyter server extension enable --user`
    records it, and in every dir Jupyter reads before that one which lists the extension: the
    environment's own (where the package ships it disabled and Jupyter's own `enable` writes
    by default) comes first inside a virtual environment, and would decide otherwise.
    OSError when one of those cannot be written.
    """
    path = path or config_path()
    person = person or config_dir()
    before = path[: path.index(person)] if person in path else path
    targets = [d for d in before if listed_state(d) is not None] + [person]
    config: dict[str, object] = {"ServerApp": {"jpserver_extensions": {EXTENSION: enabled}}}
    if not live_cells:
        config[EXTENSION_SETTINGS] = {"live_cells": False}
    written = []
    for directory in targets:
        file = directory / EXTENSION_CONFIG
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        written.append(file)
    return written


def live_cells_enabled(path: list[Path] | None = None) -> bool:
    """Return whether the config that decides on loomgate's extension leaves live cells on
    (the default)."""
    try:
        config = json.loads(enabled_config(path).read_text(encoding="utf-8"))
        return config.get(EXTENSION_SETTINGS, {}).get("live_cells", True) is not False
    except (OSError, ValueError, AttributeError):
        return True


def is_enabled(path: list[Path] | None = None) -> bool:
    """Return whether the person's Jupyter config enables loomgate's extension (the first dir
    on Jupyter's path that lists it decides)."""
    states = (listed_state(directory) for directory in path or config_path())
    return next((state for state in states if state is not None), False)
