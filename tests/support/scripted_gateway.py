"""A gateway that answers from a script, in the test's own process and event loop, for the one
answer no real gateway of this version gives: that of a gateway from before sandboxes, which
ignores the profile a kernel is asked to run under and starts it unconfined. Everything else a
translator is tested against is a real gateway (tests/support/gateways.py)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from tornado import httpserver, web

from tests.support.wire_values import kernel

TOKEN = "scripted-token"
# (status, body) for a request's JSON body; a route is "METHOD path" under /api/loomgate/.
Answer = tuple[int, object]
Route = Callable[[dict[str, Any]], Answer]


# The info answer of a gateway from before sandboxes: it names no profiles and no default.
INFO: dict[str, Any] = {
    "service": "loomgate",
    "version": "0",
    "mode": "gateway",
    "protocol": 1,
    "capabilities": [],
    "pid": 1,
    "started": 0.0,
    "kernel_specs": ["python3"],
    "default_kernel_spec": "python3",
    "conversation_grace_seconds": 600.0,
    "prewarm": 0,
    "prewarmed": [],
    "upstream": None,
    "upstream_error": None,
}


def refusal(status: int, code: str, message: str) -> Answer:
    """Return a refusal answer."""
    return status, {"error": code, "message": message}


def started_unconfined(body: dict[str, Any]) -> Answer:
    """Answer a request for a kernel as a gateway from before sandboxes does: started (201),
    whatever profile `body` asked for, with no sandbox."""
    return 201, {"kernel": kernel(sandbox=None), "created": True}


@dataclass
class ScriptedGateway:
    """The routes it answers and every request it was sent (method, path, JSON body)."""

    routes: dict[str, Route]
    url: str = ""
    requests: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


def not_found(body: dict[str, Any]) -> Answer:
    """Answer that there is no such kernel."""
    return refusal(404, "not_found", "no kernel named that")


class _Handler(web.RequestHandler):
    def initialize(self, script: ScriptedGateway) -> None:
        self.script = script

    async def _answer(self, path: str) -> None:
        body = json.loads(self.request.body or b"{}")
        method = self.request.method or "GET"
        self.script.requests.append((method, path, body))
        route = self.script.routes.get(f"{method} {path}")
        if route is None and method == "GET" and path.startswith("kernels/"):
            route = not_found
        status, answer = route(body) if route is not None else (200, {})
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(answer))

    async def get(self, path: str) -> None:
        await self._answer(path)

    async def post(self, path: str) -> None:
        await self._answer(path)

    async def put(self, path: str) -> None:
        await self._answer(path)

    async def delete(self, path: str) -> None:
        await self._answer(path)


@asynccontextmanager
async def scripted_gateway(routes: Mapping[str, Route]) -> AsyncIterator[ScriptedGateway]:
    """Yield a scripted gateway listening on a free loopback port (GET info answers `INFO`
    unless routed; an unrouted GET of a kernel is 404; anything else unrouted is 200 {})."""
    script = ScriptedGateway({"GET info": lambda body: (200, INFO), **routes})
    app = web.Application([(r"/api/loomgate/(.*)", _Handler, {"script": script})])
    server = httpserver.HTTPServer(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    server.add_sockets([sock])
    script.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        yield script
    finally:
        server.stop()
        await server.close_all_connections()
