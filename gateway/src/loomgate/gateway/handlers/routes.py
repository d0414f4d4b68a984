"""Where each loomgate endpoint is mounted under the server's base URL."""

from __future__ import annotations

from jupyter_server.base.handlers import JupyterHandler

from loomgate.gateway.handlers.channel import ChannelHandler
from loomgate.gateway.handlers.events import EventsHandler
from loomgate.gateway.handlers.executions import (
    ExecutionHandler,
    ExecutionsHandler,
    InputHandler,
    RichHandler,
    SearchHandler,
    StreamHandler,
    TracebackHandler,
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
from loomgate.gateway.monitor.page import MonitorPageHandler
from loomgate.gateway.monitor.tool_calls import ToolCallsHandler


def routes(server_base: str = "") -> list[tuple[str, type[JupyterHandler]]]:
    """Return the URL routes of loomgate's endpoints and its monitor page under `server_base`."""
    base = server_base + "/api/loomgate"
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
        (execution + r"/traceback", TracebackHandler),
        (execution + r"/input", InputHandler),
        (kernel + r"/search", SearchHandler),
        (base + r"/events", EventsHandler),
        (base + r"/channel", ChannelHandler),
        (base + r"/tool-calls", ToolCallsHandler),
        (server_base + r"/loomgate/monitor", MonitorPageHandler),
        (base + r"/shutdown", ShutdownHandler),
    ]
