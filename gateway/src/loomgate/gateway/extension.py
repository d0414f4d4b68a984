"""The jupyter_server extension: loomgate's own gateway, or records inside anyone's Jupyter.

`loomgate-gateway` configures a ServerApp for it (app.py). Enabled in a person's `jupyter lab`
or `jupyter server` (`jupyter server extension enable loomgate.gateway`), it makes that server
a gateway too: its kernels get records and the /api/loomgate/ endpoints, under its own auth.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from jupyter_server.extension.config import ExtensionConfigManager
from traitlets import Bool
from traitlets.config import Config, Configurable

from loomgate.gateway.events import EventBus
from loomgate.gateway.handlers.routes import routes
from loomgate.gateway.kernels.holders import DEFAULT_IDLE_CAP
from loomgate.gateway.kernels.manager import LoomMappingKernelManager
from loomgate.gateway.kernels.registry import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_RETENTION_DAYS,
    KernelRegistry,
)
from loomgate.gateway.monitor.tool_calls import ToolCallLog
from loomgate.gateway.upstream.manager import UpstreamMappingKernelManager
from loomgate.shared.paths import ensure_private_dir, state_dir
from loomgate.shared.wire import GatewayMode

if TYPE_CHECKING:
    from jupyter_server.serverapp import ServerApp

PURGE_INTERVAL_SECONDS = 3600.0
EXTENSION_DIR = "jupyter"  # in the state dir: the records of each Jupyter server's kernels
SERVER_LOCK = "server.lock"
KERNEL_MANAGER = "loomgate.gateway.kernels.manager.LoomMappingKernelManager"
WEBSOCKET_CONNECTION = "loomgate.gateway.kernels.manager.NodelayWebsocketConnection"
CONFIG_SECTION = "jupyter_server_config"  # the config files (and config.d dirs) of the server
SETTINGS_SECTION = "LoomgateExtension"


class LoomgateExtension(Configurable):
    """The extension's settings in a person's Jupyter config (`c.LoomgateExtension.…`)."""

    live_cells = Bool(
        True,
        config=True,
        help="Show the cells an agent runs through loomgate as new cells of the notebook whose "
        "kernel they run on, while it is open with jupyter-collaboration (marked as the "
        "agent's: tag loomgate-agent, metadata loomgate).",
    )


def extension_settings(serverapp: ServerApp) -> LoomgateExtension:
    """Return the extension's settings: those `loomgate jupyter enable` wrote beside the line
    that enables it (a config.d file, which jupyter_server reads only for its extensions list),
    with the person's config files and command line over them."""
    written = ExtensionConfigManager(read_config_path=serverapp.config_file_paths).get(
        CONFIG_SECTION
    )
    config = Config({SETTINGS_SECTION: written.get(SETTINGS_SECTION, {})})
    config.merge(serverapp.config)
    return LoomgateExtension(config=config)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Return this module as the extension point."""
    return [{"module": "loomgate.gateway.extension"}]


def mode_of(serverapp: ServerApp) -> GatewayMode:
    """Return "gateway" for loomgate's own server, "extension" inside another Jupyter server."""
    return "gateway" if hasattr(serverapp, "loomgate_state_dir") else "extension"


def upstream_configured(serverapp: ServerApp) -> bool:
    """Return whether the server sends its kernels to a remote gateway (GatewayClient.url)."""
    url = serverapp.config.get("GatewayClient", {}).get("url")
    return bool(url or os.environ.get("JUPYTER_GATEWAY_URL"))


def _link_jupyter_server_extension(serverapp: ServerApp) -> None:
    """Give an enabled server loomgate's kernel manager, before it creates its own.

    Passed upstream as extension config, as ExtensionApp's link step does. A kernel manager or
    websocket class the person configured stays theirs; the extension then stays off (load says
    why).
    """
    if mode_of(serverapp) == "gateway" or upstream_configured(serverapp):
        return
    chosen: dict[str, str] = {}
    configured = serverapp.config.get("ServerApp", {})
    if "kernel_manager_class" not in configured:
        chosen["kernel_manager_class"] = KERNEL_MANAGER
    if "kernel_websocket_connection_class" not in configured:
        # The standard kernel websocket without Nagle's 40 ms delay on small frames.
        chosen["kernel_websocket_connection_class"] = WEBSOCKET_CONNECTION
    serverapp.update_config(Config({"ServerApp": chosen}))


def _load_jupyter_server_extension(serverapp: ServerApp) -> None:
    """Attach the record registry to the kernel manager and add loomgate's routes."""
    mkm = serverapp.kernel_manager
    mode = mode_of(serverapp)
    if not isinstance(mkm, (LoomMappingKernelManager, UpstreamMappingKernelManager)):
        if mode == "gateway":
            raise RuntimeError(f"loomgate needs --ServerApp.kernel_manager_class={KERNEL_MANAGER}")
        serverapp.log.error(
            "loomgate: not enabled: this server's kernel manager is %s (configured elsewhere, or "
            "kernels on a remote gateway), and loomgate records only kernels it manages",
            type(mkm).__name__,
        )
        return
    directory = records_dir(serverapp, mode)
    events = EventBus()
    registry = KernelRegistry(
        mkm,
        directory,
        events,
        grace_seconds=float(
            getattr(serverapp, "conversation_grace_seconds", DEFAULT_GRACE_SECONDS)
        ),
        retention_seconds=86400.0
        * float(getattr(serverapp, "retention_days", DEFAULT_RETENTION_DAYS)),
        log=serverapp.log,
        # Only loomgate's own server prewarms: enabled in someone's Jupyter, it starts nothing.
        prewarm=int(getattr(serverapp, "prewarm", 0)),
        idle_cap=int(getattr(serverapp, "idle_conversations", DEFAULT_IDLE_CAP)),
    )
    mkm.loom_registry = registry
    serverapp.web_app.settings.update(
        loomgate_registry=registry,
        loomgate_events=events,
        loomgate_tool_calls=ToolCallLog(events),
        loomgate_started=time.time(),
        loomgate_mode=mode,
    )
    base = serverapp.web_app.settings.get("base_url", "/").rstrip("/")
    serverapp.web_app.add_handlers(".*$", routes(base))
    serverapp.io_loop.call_later(PURGE_INTERVAL_SECONDS, _purge_periodically, serverapp, registry)
    if mode == "extension":
        serverapp.log.info("loomgate: records of this server's kernels are kept in %s", directory)


def records_dir(serverapp: ServerApp, mode: GatewayMode) -> Path:
    """Return where the registry keeps its records: the gateway's state dir, or, inside another
    Jupyter server, a directory of that server's own (by its root dir, so a restarted server
    finds its records again; a second server on the same root, running at once, gets its port's).
    """
    if mode == "gateway":
        return Path(getattr(serverapp, "loomgate_state_dir", "") or state_dir())
    root = str(Path(serverapp.root_dir).expanduser().resolve())
    key = hashlib.sha256(root.encode()).hexdigest()[:12]
    parent = ensure_private_dir(state_dir() / EXTENSION_DIR)
    for name in (key, f"{key}-{serverapp.port}"):
        directory = ensure_private_dir(parent / name)
        if _lock(directory):
            return directory
    raise RuntimeError(f"loomgate: another Jupyter server keeps its records in {parent / key}")


def _lock(directory: Path) -> bool:
    """Return whether this process now holds `directory`'s server lock (for as long as it runs)."""
    fd = os.open(directory / SERVER_LOCK, os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    return True  # the descriptor stays open: the lock lasts as long as the server


async def _start_jupyter_server_extension(serverapp: ServerApp) -> None:
    """Take back the kernels an earlier gateway left running (the IO loop runs now)."""
    registry: KernelRegistry | None = serverapp.web_app.settings.get("loomgate_registry")
    if registry is not None:
        await registry.take_back()
        if mode_of(serverapp) == "extension":
            start_live_cells(serverapp, registry)


def start_live_cells(serverapp: ServerApp, registry: KernelRegistry) -> None:
    """Write the agent's cells into the notebooks open in jupyter-collaboration (once every
    extension is loaded), unless the person's config turns it off."""
    settings = serverapp.web_app.settings
    collaboration = settings.get("jupyter_server_ydoc")
    if not extension_settings(serverapp).live_cells:
        serverapp.log.info("loomgate: live cells are off (LoomgateExtension.live_cells)")
        return
    if collaboration is None:
        return  # without jupyter-collaboration, nothing is written into the person's files
    from loomgate.gateway.live_cells import LiveCells, notebook_paths, shared_documents

    session_manager = serverapp.session_manager
    live = LiveCells(
        registry.stores,
        shared_documents(collaboration),
        lambda kernel_id: notebook_paths(session_manager, kernel_id),
        serverapp.log,
    )
    live.attach(settings["loomgate_events"])
    settings["loomgate_live_cells"] = live
    serverapp.log.info("loomgate: the agent's cells appear in the notebooks open on its kernels")


def _purge_periodically(serverapp: ServerApp, registry: KernelRegistry) -> None:
    registry.purge_expired()
    serverapp.io_loop.call_later(PURGE_INTERVAL_SECONDS, _purge_periodically, serverapp, registry)
