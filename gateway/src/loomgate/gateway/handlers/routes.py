"""Where each loomgate endpoint is mounted under the server's base URL."""

from __future__ import annotations

from jupyter_server.base.handlers import APIHandler

from loomgate.gateway.handlers.events import EventsHandler
from loomgate.gateway.handlers.executions import (
    ExecutionHandler,
    ExecutionsHandler,
    InputHandler,
    RichHandler,
    SearchHandler,
    StreamHandler,
)
from loomgate.gateway.handlers.kernels import (
    InfoHandler,
    InterruptHandler,
    KernelHandler,
    KernelsHandler,
    ResetHandler,
    SetupHandler,
    ShutdownHandler,
)


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
        (kernel + r"/setup", SetupHandler),
        (kernel + r"/executions", ExecutionsHandler),
        (execution, ExecutionHandler),
        (execution + r"/streams/(?P<stream>[^/]+)", StreamHandler),
        (execution + r"/rich/(?P<index>[^/]+)", RichHandler),
        (execution + r"/input", InputHandler),
        (kernel + r"/search", SearchHandler),
        (base + r"/events", EventsHandler),
        (base + r"/shutdown", ShutdownHandler),
    ]
