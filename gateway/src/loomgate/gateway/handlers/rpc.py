"""The rpc websocket: one connection per client carrying any JSON endpoint's calls, so they skip
the per-request work of an HTTP request (routing, handler set-up, auth, access log) that a
Jupyter Server repeats for every one.

A client sends `{"id": N, "method": M, "path": P, "query": {...}, "body": {...}}` (P relative
to /api/loomgate/, as HTTP's) and gets `{"id": N, "status": S, "body": {...}}` back: the status
and body HTTP would have given, from the same route table (handlers/table.py). Calls run
concurrently; answers come in the order they finish. The server's auth runs once, on the
upgrade; each call is authorized as HTTP authorizes its method.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.auth.utils import HTTP_METHOD_TO_AUTH_ACTION
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.utils import ensure_async
from tornado import version_info, web
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from loomgate.gateway.errors import BadRequest
from loomgate.gateway.handlers.answers import Answer, Endpoint, answered, failure
from loomgate.gateway.handlers.call import Call
from loomgate.gateway.handlers.table import Route, find
from loomgate.shared import wire
from loomgate.shared.echo import echo

MAX_MESSAGE_BYTES = 64 << 20  # a cell's source, at most
# tornado pings the client this often (seconds); a client whose pong does not come back in
# PING_TIMEOUT is gone. Before tornado 6.5 the timeout counted from the last pong, so it had to
# span a few pings; from 6.5 it counts from each ping and may not exceed the interval.
PING_INTERVAL = 30.0
PING_TIMEOUT = PING_INTERVAL if version_info >= (6, 5) else 3 * PING_INTERVAL
AUTH_RESOURCE = "kernels"
QUERY_VALUES = (str, int, float)  # what a query value may be (booleans are ints)
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0e-\x1f]")  # as tornado's query arguments lose


class RpcRequest(NamedTuple):
    """An rpc message, parsed: the route and endpoint it calls, with the call's arguments."""

    method: wire.RpcMethod
    route: Route
    endpoint: Endpoint
    path: Mapping[str, str]
    query: Mapping[str, object]
    body: object  # the JSON body, None when there is none


def call_id(message: str | bytes) -> tuple[int, dict[str, Any]]:
    """Return a message's id and its object; BadRequest if it is not an object with one."""
    try:
        data = json.loads(message)
    except ValueError as e:
        raise BadRequest(f"an rpc message must be JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("id"), int):
        raise BadRequest("an rpc message is an object with an integer id")
    return data["id"], data


def query_value(value: object) -> str:
    """Return a query value as HTTP's query would carry it: text as tornado reads it (control
    characters made spaces, stripped), numbers and booleans spelt as in a URL."""
    if isinstance(value, str):
        return CONTROL_CHARACTERS.sub(" ", value).strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_request(data: Mapping[str, Any]) -> RpcRequest:
    """Return the request of an rpc call (wire.RpcCall); BadRequest if it is not one, HTTP's
    404 or 405 when its path or method is not an endpoint's."""
    if "method" not in data and "path" not in data:
        raise BadRequest("an rpc call gives its method and path (relative to /api/loomgate/)")
    method, path = data.get("method"), data.get("path")
    if method not in wire.RPC_METHODS:
        raise BadRequest(f"method must be one of {', '.join(wire.RPC_METHODS)}, not {echo(method)}")
    if not isinstance(path, str) or "?" in path or "#" in path:
        raise BadRequest(
            "path must be a string relative to /api/loomgate/ (kernels/K/executions), with "
            "its query apart"
        )
    query = data.get("query") or {}
    if not isinstance(query, dict) or not all(
        value is None or isinstance(value, QUERY_VALUES) for value in query.values()
    ):
        raise BadRequest("query must be an object of strings")
    route, endpoint, arguments = find(method, path[1:] if path[:1] == "/" else path)
    values = {k: query_value(v) for k, v in query.items() if v is not None} if query else query
    return RpcRequest(method, route, endpoint, arguments, values, data.get("body"))


class RpcHandler(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """GET /api/loomgate/rpc (websocket): any JSON endpoint's calls, answered by id."""

    auth_resource = AUTH_RESOURCE
    monitor_readable = False  # the monitor's credential never opens it (monitor/access.py)

    def set_default_headers(self) -> None:
        """Send none of JupyterHandler's page headers, as the kernel websocket does not."""

    def get_compression_options(self) -> None:
        """Return None: frames go uncompressed (small JSON, sent at once)."""
        return None

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        """Upgrade to the rpc websocket once the user may execute in kernels."""
        user = self.current_user
        if not await ensure_async(
            self.authorizer.is_authorized(self, user, "execute", AUTH_RESOURCE)
        ):
            raise web.HTTPError(403)
        await super().get(*args, **kwargs)

    @property
    def ping_interval(self) -> float:
        """Return how often tornado pings the client, in seconds (WebSocketMixin's value is
        milliseconds, which tornado would read as seconds, and warn of at the first upgrade)."""
        return PING_INTERVAL

    @property
    def ping_timeout(self) -> float:
        """Return how long tornado waits for a pong before it closes the websocket (seconds)."""
        return PING_TIMEOUT

    def open(self, *args: Any, **kwargs: Any) -> None:
        """Switch Nagle off: each answer is one frame, wanted at once. tornado's pings keep the
        websocket alive (not WebSocketMixin's timer, which reads `ping_interval` in ms)."""
        self.set_nodelay(True)
        self._answering: set[asyncio.Task[None]] = set()
        self._agent = self.request.headers.get(wire.AGENT_HEADER) == "1"
        WebSocketHandler.open(self, *args, **kwargs)

    def on_message(self, message: str | bytes) -> None:
        """Answer the call in a task of its own (a long poll must not hold the others)."""
        task = asyncio.ensure_future(self._answer(message))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _authorize(self, method: str) -> None:
        """Refuse (HTTP's 403) a call the user may not make, as HTTP's @authorized would."""
        action = HTTP_METHOD_TO_AUTH_ACTION[method]
        user = self.current_user
        if not await ensure_async(self.authorizer.is_authorized(self, user, action, AUTH_RESOURCE)):
            message = f"User is not authorized to {action} on resource: {AUTH_RESOURCE}."
            raise web.HTTPError(403, message)

    async def _answer(self, message: str | bytes) -> None:
        """Send the answer to one message: its endpoint's, or the refusal of the message."""
        number = -1  # a message without an id is answered with this one
        answer: Answer
        try:
            number, data = call_id(message)
            request = parse_request(data)
            await self._authorize(request.method)
        except Exception as e:  # a bad message, an unknown path or method, a refused call
            answer = failure(e, "an rpc message")
        else:
            call = Call(
                self.settings,
                request.method,
                request.route.name,
                request.path,
                request.query,
                body=request.body,
                agent=self._agent,
            )
            answer = await answered(call, request.endpoint, request.route.takes.get(call.method))
        # A client that went away misses the answer; the cell runs on and its record keeps it.
        with contextlib.suppress(WebSocketClosedError):
            status, body = answer
            await self.write_message(
                json.dumps(wire.RpcAnswer(id=number, status=status, body=dict(body)))
            )

    @property
    def max_message_size(self) -> int:
        """Return the largest message the websocket takes."""
        return MAX_MESSAGE_BYTES
