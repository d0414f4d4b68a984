"""The HTTP side of loomgate's endpoints: one thin tornado handler per route of the table,
which makes the call from the request and writes its answer as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from loomgate.gateway.handlers.answers import Endpoint, answered
from loomgate.gateway.handlers.call import Call
from loomgate.gateway.handlers.table import Route
from loomgate.gateway.monitor.access import READ_ONLY, MonitorReadOnly
from loomgate.shared import wire


class QueryArguments(Mapping[str, object]):
    """A request's query arguments as tornado reads them (the last value of each, decoded,
    control characters made spaces, stripped), each read when first asked for."""

    __slots__ = ("_handler",)

    def __init__(self, handler: web.RequestHandler) -> None:
        self._handler = handler

    def __getitem__(self, name: str) -> str:
        value = self._handler.get_query_argument(name, None)
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._handler.request.query_arguments)

    def __len__(self) -> int:
        return len(self._handler.request.query_arguments)


class LoomHandler(APIHandler):
    """Base of loomgate's HTTP handlers: a request becomes a Call; answers are JSON."""

    auth_resource = "kernels"
    monitor_readable = False  # whether the monitor credential may GET it (monitor/access.py)
    refusal: wire.ErrorCode | None = None  # the refusal's code, when it is one (access log)

    def call(self, route: str, path: Mapping[str, str]) -> Call:
        """Return the call this request makes on `route` with the path's arguments."""
        request = self.request
        method = request.method or "GET"
        agent = request.headers.get(wire.AGENT_HEADER) == "1"
        arguments = QueryArguments(self)
        return Call(
            self.settings, method, route, path, arguments, raw_body=request.body, agent=agent
        )

    def reply(self, data: Mapping[str, object], status: int = 200) -> None:
        """Finish the request with `data` as its JSON body."""
        self.set_status(status)
        self.finish(json.dumps(data))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Write the monitor token's refusal as a loomgate refusal (code `forbidden`); any
        other error as Jupyter does."""
        exc_info = kwargs.get("exc_info")
        if exc_info is not None and isinstance(exc_info[1], MonitorReadOnly):
            self.refusal = "forbidden"
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(wire.Refusal(error="forbidden", message=READ_ONLY)))
            return
        super().write_error(status_code, **kwargs)


def http_method(route: Route, endpoint: Endpoint) -> object:
    """Return a handler method that answers `route`'s call with `endpoint`, behind the server's
    token auth and kernel authorization (the action from the HTTP method)."""

    async def handle(self: LoomHandler, **path: str) -> None:
        call = self.call(route.name, path)
        status, body = await answered(call, endpoint, route.takes.get(call.method))
        code = wire.refusal_code(body)
        if status >= 400 and code is not None and code != "internal":
            self.refusal = code
        if route.file is not None and status == 200:
            self.set_status(status)
            self.finish(route.file.text(body), set_content_type=route.file.media_type)
        else:
            self.reply(body, status)

    handle.__doc__ = endpoint.__doc__
    return web.authenticated(authorized(handle))


def http_handler(route: Route) -> type[LoomHandler]:
    """Return the HTTP handler class of `route`: one method per endpoint, nothing more."""

    class Handler(LoomHandler):
        monitor_readable = route.monitor_readable

    for method, endpoint in route.endpoints.items():
        setattr(Handler, method.lower(), http_method(route, endpoint))
    Handler.__name__ = Handler.__qualname__ = route.handler
    Handler.__doc__ = f"{', '.join(route.endpoints)} /api/loomgate/{route.name}"
    return Handler
