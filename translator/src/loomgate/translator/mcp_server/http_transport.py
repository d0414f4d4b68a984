"""Serving over Streamable HTTP: the SDK's app (its bearer check in front of the MCP path), its
401 worded in one sentence, and the start line once the port listens."""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from loomgate.translator.mcp_server.bearer_token import BearerToken
from loomgate.translator.mcp_server.settings import Settings
from loomgate.translator.presentation.http_access import (
    endpoint_url,
    http_start_lines,
    unauthorized,
)

UNAUTHORIZED_CODE = -32001  # a JSON-RPC server error: the SDK's client shows its message


async def serve_http(server: MCPServer[Any], settings: Settings, token: BearerToken | None) -> None:
    """Serve `server` on settings.host:port until stopped; say how a host sends `token` (None:
    --no-auth) once the port listens, naming its file or variable, never the token."""
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=settings.path, host=settings.host)
    config = uvicorn.Config(
        OneSentenceUnauthorized(app), host=settings.host, port=settings.port, log_level="info"
    )
    listening = config.bind_socket()  # exits with uvicorn's own message if the port is taken
    listening.listen(config.backlog)  # from now on a host's connection waits for the app
    url = endpoint_url(settings.host, settings.port, settings.path)
    token_file = str(token.file) if token is not None and token.file is not None else None
    token_env = token.env if token is not None else None
    print(http_start_lines(url, token_file=token_file, token_env=token_env), file=sys.stderr)
    sys.stderr.flush()
    await uvicorn.Server(config).serve(sockets=[listening])


class OneSentenceUnauthorized:
    """ASGI wrapper: the SDK's 401 (no or wrong bearer token) goes out as one sentence in a
    JSON-RPC error, which MCP clients show, with the SDK's WWW-Authenticate header kept."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; word a 401 the app answers."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = any(  # a bearer token, right or wrong (ASGI header names are lower case)
            name == b"authorization" and value[:7].lower() == b"bearer "
            for name, value in scope.get("headers", ())
        )
        replaced = False

        async def reworded(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 401:
                replaced = True
                kept = [(k, v) for k, v in message.get("headers", ()) if k == b"www-authenticate"]
                await unauthorized_response(send, unauthorized(sent), kept)
            elif not replaced:  # the SDK's own body of a replaced 401 is dropped
                await send(message)

        await self.app(scope, receive, reworded)


async def unauthorized_response(
    send: Send, sentence: str, headers: list[tuple[bytes, bytes]]
) -> None:
    """Send a whole 401 whose body is `sentence` as a JSON-RPC error."""
    error = {"code": UNAUTHORIZED_CODE, "message": sentence}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
