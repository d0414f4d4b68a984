"""The jupyter_server extension: builds the registry and mounts the /api/loomgate/ handlers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import APIHandler

from loomgate.gateway.event_stream import EventsHandler
from loomgate.gateway.events import EventBus
from loomgate.gateway.execution_endpoints import (
    ExecutionHandler,
    ExecutionsHandler,
    InputHandler,
    RichHandler,
    SearchHandler,
    StreamHandler,
)
from loomgate.gateway.kernel_endpoints import (
    InfoHandler,
    InterruptHandler,
    KernelHandler,
    KernelsHandler,
    ResetHandler,
)
from loomgate.gateway.kernel_manager import LoomMappingKernelManager
from loomgate.gateway.registry import KernelRegistry
from loomgate.shared.paths import state_dir

DEFAULT_GRACE_SECONDS = 600.0
DEFAULT_RETENTION_DAYS = 7.0
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
            "loomgate.gateway.kernel_manager.LoomMappingKernelManager"
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
    )
    mkm.loom_registry = registry
    serverapp.web_app.settings.update(
        loomgate_registry=registry, loomgate_events=events, loomgate_started=time.time()
    )
    base = serverapp.web_app.settings.get("base_url", "/").rstrip("/")
    serverapp.web_app.add_handlers(".*$", routes(base + "/api/loomgate"))
    serverapp.io_loop.call_later(PURGE_INTERVAL_SECONDS, _purge_periodically, serverapp, registry)


def _purge_periodically(serverapp: Any, registry: KernelRegistry) -> None:
    registry.purge_expired()
    serverapp.io_loop.call_later(PURGE_INTERVAL_SECONDS, _purge_periodically, serverapp, registry)


def routes(base: str = "/api/loomgate") -> list[tuple[str, type[APIHandler]]]:
    """Return the URL routes of loomgate's endpoints."""
    kernel = base + r"/kernels/(?P<ref>[^/]+)"
    execution = kernel + r"/executions/(?P<selector>[^/]+)"
    return [
        (base + r"/info", InfoHandler),
        (base + r"/kernels", KernelsHandler),
        (kernel, KernelHandler),
        (kernel + r"/interrupt", InterruptHandler),
        (kernel + r"/reset", ResetHandler),
        (kernel + r"/executions", ExecutionsHandler),
        (execution, ExecutionHandler),
        (execution + r"/streams/(?P<stream>[^/]+)", StreamHandler),
        (execution + r"/rich/(?P<index>[^/]+)", RichHandler),
        (execution + r"/input", InputHandler),
        (kernel + r"/search", SearchHandler),
        (base + r"/events", EventsHandler),
    ]
