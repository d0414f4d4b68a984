"""Where each loomgate endpoint is mounted under the server's base URL: the JSON endpoints of
the route table (one generated handler each), the event stream, the rpc websocket and the
monitor page."""

from __future__ import annotations

from jupyter_server.base.handlers import JupyterHandler

from loomgate.gateway.handlers.events import EventsHandler
from loomgate.gateway.handlers.http import http_handler
from loomgate.gateway.handlers.rpc import RpcHandler
from loomgate.gateway.handlers.table import ROUTES
from loomgate.gateway.monitor.page import MonitorPageHandler

HANDLERS = [(route.pattern, http_handler(route)) for route in ROUTES]


def routes(server_base: str = "") -> list[tuple[str, type[JupyterHandler]]]:
    """Return the URL routes of loomgate's endpoints and its monitor page under `server_base`."""
    base = server_base + "/api/loomgate/"
    return [
        *((base + pattern, handler) for pattern, handler in HANDLERS),
        (base + "events", EventsHandler),
        (base + "rpc", RpcHandler),
        (server_base + r"/loomgate/monitor", MonitorPageHandler),
    ]
