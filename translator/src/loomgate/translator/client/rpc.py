"""The rpc websocket to a plain-http gateway (GET /api/loomgate/rpc): any JSON request as a
wire.RpcCall, answered by id with the status and body HTTP would have given, so that each skips
the per-request work a Jupyter Server does for an HTTP request.

The protocol is the `websockets` library's (its asyncio client); this module keeps only the id
matching and the failure mapping the session relies on: a connection refused is a failure whose
cause says so (the call never arrived), a socket that closes mid-call is "dropped" (the call may
have arrived, so it is never resent blindly), a missing answer is "timeout". A gateway that
answers the upgrade with anything but 101 (an older loomgate, a stock Jupyter server) has no
rpc. `websockets` is imported only when an rpc opens (import_websockets, off the event loop).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeGuard, get_args

from loomgate.shared import wire
from loomgate.translator.client.transport import TransportFailure, deadline

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

PATH = "rpc"
MAX_MESSAGE_BYTES = 1 << 30  # an answer larger than this (in one frame or many) ends the rpc
CLOSE_TIMEOUT = 2.0  # how long aclose waits for the gateway to answer its CLOSE
RPC_METHODS: tuple[str, ...] = get_args(wire.RpcMethod)
# websockets logs the upgrade's headers (the token among them) at debug level: its records go
# to this logger, which never passes them on.
QUIET = logging.getLogger("loomgate.translator.rpc.websocket")
QUIET.propagate = False
QUIET.setLevel(logging.WARNING)


def is_rpc_method(method: str) -> TypeGuard[wire.RpcMethod]:
    """Return whether `method` can travel as an rpc call."""
    return method in RPC_METHODS


async def import_websockets() -> None:
    """Import websockets' asyncio client in a daemon thread, so that the event loop (and a
    translator that exits before it is needed) never waits for it."""
    if "websockets.asyncio.client" in sys.modules:
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def run() -> None:
        error: BaseException | None = None
        try:
            import websockets.asyncio.client  # noqa: F401
        except BaseException as e:  # an import that fails is the rpc's failure to open
            error = e
        with contextlib.suppress(RuntimeError):  # the loop has closed: no one waits any more
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=run, name="loomgate rpc import", daemon=True).start()
    await done


class RpcTransport:
    """One open rpc: calls are sent at once, their answers matched by id as they come."""

    def __init__(self, websocket: ClientConnection) -> None:
        self._websocket = websocket
        self._waiting: dict[int, asyncio.Future[tuple[int, object]]] = {}
        self._next_id = 0
        self.closed = False
        self._reading = asyncio.ensure_future(self._read())

    @classmethod
    async def open(
        cls, url: str, headers: Mapping[str, str], connect_timeout: float
    ) -> RpcTransport | None:
        """Return an rpc to the gateway at `url` (http://…), or None if it has none (it answered
        the upgrade with anything but 101); TransportFailure if it cannot be reached."""
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidHandshake, InvalidMessage, InvalidStatus

        target = "ws" + url.removeprefix("http") + f"/api/loomgate/{PATH}"
        try:
            websocket = await connect(
                target,
                additional_headers=dict(headers),
                user_agent_header=None,
                compression=None,
                proxy=None,
                open_timeout=connect_timeout,
                ping_interval=None,  # the gateway pings; a silent gateway is a call's timeout
                close_timeout=CLOSE_TIMEOUT,
                max_size=MAX_MESSAGE_BYTES,
                logger=QUIET,
            )
        except InvalidMessage as e:  # the connection closed or spoke no HTTP
            raise TransportFailure(f"the connection was closed: {e}", "dropped") from e
        except InvalidStatus as e:
            if e.response.status_code in (401, 403):
                raise TransportFailure("the upgrade refused the token", "token") from None
            return None
        except InvalidHandshake:
            return None
        except (TimeoutError, asyncio.TimeoutError):  # one class from Python 3.11 on
            raise TransportFailure("connection timed out", "connect_timeout") from None
        except OSError as e:
            raise TransportFailure(str(e) or type(e).__name__, "failed") from e
        sock = websocket.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(websocket)

    async def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: Mapping[str, object] | None,
        timeout: float,
    ) -> tuple[int, object]:
        """Return the answer to one call; TransportFailure if the rpc closes first (the call
        may have reached the gateway) or no answer comes within `timeout` s."""
        from websockets.exceptions import ConnectionClosed

        if self.closed:
            raise TransportFailure("the rpc was closed", "dropped")
        if not is_rpc_method(method):
            raise ValueError(f"{method} cannot travel over the rpc")
        self._next_id += 1
        call_id = self._next_id
        message: wire.RpcCall = {"id": call_id, "method": method, "path": path}
        if query:
            message["query"] = dict(query)
        if body is not None:
            message["body"] = dict(body)
        answer: asyncio.Future[tuple[int, object]] = asyncio.get_running_loop().create_future()
        self._waiting[call_id] = answer
        try:
            async with deadline(timeout):
                await self._websocket.send(json.dumps(message))
                return await answer
        except TimeoutError:
            raise TransportFailure(f"no answer within {timeout:g} s", "timeout") from None
        except ConnectionClosed as e:
            raise TransportFailure(f"the connection was closed: {e}", "dropped") from e
        finally:
            self._waiting.pop(call_id, None)

    async def _read(self) -> None:
        """Deliver each answer to its call; on the end, fail what still waits as dropped."""
        from websockets.exceptions import ConnectionClosed

        ending = TransportFailure("the gateway closed the rpc", "dropped")
        try:
            async for message in self._websocket:
                self._deliver(message)
        except ConnectionClosed as e:
            ending = TransportFailure(f"the connection was closed: {e}", "dropped")
        except TransportFailure as e:
            ending = e
            await self._websocket.close(1002, "a broken answer")
        finally:
            self.closed = True
            for answer in self._waiting.values():
                if not answer.done():
                    answer.set_exception(ending)

    def _deliver(self, message: str | bytes) -> None:
        """Resolve the call the answer names (one no longer waited for is dropped)."""
        try:
            data: wire.RpcAnswer = json.loads(message)
            call_id, status, body = data["id"], int(data["status"]), data["body"]
        except (ValueError, KeyError, TypeError) as e:
            raise TransportFailure(f"the rpc sent a broken answer ({e})", "dropped") from e
        answer = self._waiting.get(call_id)
        if answer is not None and not answer.done():
            answer.set_result((status, body))

    async def aclose(self) -> None:
        """Close the rpc (a CLOSE frame, answered); calls still waiting fail as dropped."""
        await self._websocket.close()
        await self._reading
