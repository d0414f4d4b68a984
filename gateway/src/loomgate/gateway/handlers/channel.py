"""The channel: one websocket per client carrying the hot calls (submit a cell, follow an
execution), so they skip the per-request work of an HTTP request (routing, handler set-up,
auth, access log) that a Jupyter Server repeats for every one.

A client sends `{"id": N, "call": "submit", "kernel": REF, "args": {...}}` or
`{"id": N, "call": "follow", "kernel": REF, "execution": SELECTOR, "args": {...}}` (the args of
`POST …/executions` and of `GET …/executions/{sel}`) and gets `{"id": N, "status": S, "body":
{...}}` back, the status and body HTTP would have given. Calls run concurrently; answers come
in the order they finish. Auth is the server's own, once, on the upgrade.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from jupyter_server.auth.decorator import ws_authenticated
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.utils import ensure_async
from tornado import web
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from loomgate.gateway.errors import BadRequest, Refusal
from loomgate.gateway.handlers.base import LoomCall
from loomgate.gateway.handlers.executions import followed, submitted
from loomgate.gateway.kernels.registry import KernelRegistry
from loomgate.shared import wire
from loomgate.shared.echo import echo

MAX_MESSAGE_BYTES = 64 << 20  # a cell's source, at most


class ChannelCall(LoomCall):
    """One call that came over the channel: its arguments are the message's `args`."""

    def __init__(self, registry: KernelRegistry, args: dict[str, Any]) -> None:
        self._registry = registry
        self.args = args

    @property
    def registry(self) -> KernelRegistry:
        """Return the gateway's kernel registry."""
        return self._registry

    def arg(self, name: str, body: dict[str, Any] | None = None) -> Any:
        """Return argument `name` from the message's args (None when absent); `body`, when
        given, is those same args."""
        return self.args.get(name)


def call_id(message: str | bytes) -> tuple[int, dict[str, Any]]:
    """Return a message's id and its object; BadRequest if it is not an object with one."""
    try:
        data = json.loads(message)
    except ValueError as e:
        raise BadRequest(f"a channel message must be JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("id"), int):
        raise BadRequest("a channel message is an object with an integer id")
    return data["id"], data


def parse_call(data: dict[str, Any]) -> tuple[str, str, str | None, dict[str, Any]]:
    """Return a call's (name, kernel, execution selector, args); BadRequest if it is not one."""
    call, kernel, args = data.get("call"), data.get("kernel"), data.get("args", {})
    selector = data.get("execution")
    if call not in wire.CHANNEL_CALLS:
        raise BadRequest(f"unknown call {echo(call)}; use one of {', '.join(wire.CHANNEL_CALLS)}")
    if not isinstance(kernel, str) or not isinstance(args, dict):
        raise BadRequest("a call names its kernel (a string) and gives its args as an object")
    if call == "follow" and not isinstance(selector, str):
        raise BadRequest("follow names its execution: a number, 'latest' or 'current'")
    return call, kernel, selector, args


class ChannelHandler(WebSocketMixin, WebSocketHandler, JupyterHandler):
    """GET /api/loomgate/channel (websocket): submit and follow calls, answered by id."""

    auth_resource = "kernels"
    monitor_readable = False  # the monitor's credential never opens it (monitor/access.py)

    def set_default_headers(self) -> None:
        """Send none of JupyterHandler's page headers, as the kernel websocket does not."""

    def get_compression_options(self) -> None:
        """Return None: frames go uncompressed (small JSON, sent at once)."""
        return None

    @ws_authenticated
    async def get(self, *args: Any, **kwargs: Any) -> None:
        """Upgrade to the channel once the user may execute in kernels."""
        user = self.current_user
        if not await ensure_async(self.authorizer.is_authorized(self, user, "execute", "kernels")):
            raise web.HTTPError(403)
        await super().get(*args, **kwargs)

    def open(self, *args: Any, **kwargs: Any) -> None:
        """Switch Nagle off: each answer is one frame, wanted at once."""
        self.set_nodelay(True)
        self._answering: set[asyncio.Task[None]] = set()
        super().open(*args, **kwargs)

    def on_message(self, message: str | bytes) -> None:
        """Answer the call in a task of its own (a long poll must not hold the others)."""
        task = asyncio.ensure_future(self._answer(message))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _answer(self, message: str | bytes) -> None:
        """Send the answer to one message: the call's reply, or its refusal."""
        number = -1  # a message without an id is answered with this one
        try:
            number, data = call_id(message)
            call, kernel, selector, args = parse_call(data)
            registry: KernelRegistry = self.settings["loomgate_registry"]
            await registry.ready.wait()  # kernels left running are being taken back
            context = ChannelCall(registry, args)
            if call == "submit":
                status, body = 201, dict(await submitted(context, kernel, args))
            else:
                assert selector is not None
                status, body = 200, dict(await followed(context, kernel, selector))
        except Refusal as e:
            status, body = e.status, e.to_json()
        except Exception as e:  # a fault of ours: answered as HTTP's 500 would be, and logged
            self.log.exception("loomgate: a channel call failed")
            status = 500
            body = {"error": "internal", "message": f"the gateway failed ({type(e).__name__})"}
        # A client that went away misses the answer; the cell runs on and its record keeps it.
        with contextlib.suppress(WebSocketClosedError):
            answer = wire.ChannelAnswer(id=number, status=status, body=body)
            await self.write_message(json.dumps(answer))

    @property
    def max_message_size(self) -> int:
        """Return the largest message the channel takes."""
        return MAX_MESSAGE_BYTES
