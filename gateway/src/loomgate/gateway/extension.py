"""The jupyter_server extension: builds the registry and mounts the /api/loomgate/ handlers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from loomgate.gateway.events import EventBus
from loomgate.gateway.handlers.routes import routes
from loomgate.gateway.kernels.manager import LoomMappingKernelManager
from loomgate.gateway.kernels.registry import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_RETENTION_DAYS,
    KernelRegistry,
)
from loomgate.gateway.monitor.tool_calls import ToolCallLog
from loomgate.shared.paths import state_dir

PURGE_INTERVAL_SECONDS = 3600.0


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Return this module as the extension point."""
    return [{"module": "loomgate.gateway.extension"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Attach the record registry to the kernel manager and add loomgate's routes."""
    mkm = serverapp.kernel_manager
    if not isinstance(mkm, LoomMappingKernelManager):
        raise RuntimeError(
            "loomgate needs --ServerApp.kernel_manager_class="
            "loomgate.gateway.kernels.manager.LoomMappingKernelManager"
        )
    directory = Path(getattr(serverapp, "loomgate_state_dir", "") or state_dir())
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
    )
    mkm.loom_registry = registry
    serverapp.web_app.settings.update(
        loomgate_registry=registry,
        loomgate_events=events,
        loomgate_tool_calls=ToolCallLog(events),
        loomgate_started=time.time(),
    )
    base = serverapp.web_app.settings.get("base_url", "/").rstrip("/")
    serverapp.web_app.add_handlers(".*$", routes(base))
    serverapp.io_loop.call_later(PURGE_INTERVAL_SECONDS, _purge_periodically, serverapp, registry)


async def _start_jupyter_server_extension(serverapp: Any) -> None:
    """Take back the kernels an earlier gateway left running (the IO loop runs now)."""
    registry: KernelRegistry = serverapp.web_app.settings["loomgate_registry"]
    await registry.take_back()


def _purge_periodically(serverapp: Any, registry: KernelRegistry) -> None:
    registry.purge_expired()
    serverapp.io_loop.call_later(PURGE_INTERVAL_SECONDS, _purge_periodically, serverapp, registry)
