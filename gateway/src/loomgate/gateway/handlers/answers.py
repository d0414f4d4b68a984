"""How a call becomes its answer, over HTTP and the rpc websocket alike: wait until the gateway
is ready, run the endpoint, and turn what it raises into the JSON answer HTTP gives."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from http.client import responses

from tornado import web
from tornado.log import app_log

from loomgate.gateway.errors import Refusal
from loomgate.gateway.handlers.call import Call
from loomgate.shared import wire

# What a model's call on a kernel closed to agents is not refused for up front: seeing the kernel
# (and so why it is refused), and opening it (refused whatever the kernel, saying who opens it).
UNCHECKED = {("GET", "kernels/{ref}"), ("PUT", "kernels/{ref}/agents")}
Answer = tuple[int, Mapping[str, object]]  # an HTTP status and the JSON body
Endpoint = Callable[[Call], Awaitable[Answer]]


def failure(error: Exception, call: str) -> Answer:
    """Return the answer to a call (`call`: its method and route, for the log) that raised
    `error`: a Refusal's own; a server error (tornado's HTTPError) as jupyter_server's API
    handlers write it; anything else a logged 500 (a fault of ours)."""
    if isinstance(error, Refusal):
        return error.status, error.to_json()
    if isinstance(error, web.HTTPError):  # what APIHandler.write_error answers
        status = error.status_code
        message = error.log_message or responses.get(status, "Unknown HTTP Error")
        return status, {"message": message, "reason": error.reason}
    # Where HTTP's uncaught exceptions went: the server's log (and the gateway's log file).
    app_log.error("loomgate: %s failed", call, exc_info=error)
    return 500, wire.Refusal(
        error="internal", message=f"the gateway failed ({type(error).__name__})"
    )


async def answered(call: Call, endpoint: Endpoint, takes: frozenset[str] | None = None) -> Answer:
    """Return `endpoint`'s answer to `call` once the gateway is ready, or its failure's; a body
    with a field outside `takes` (the fields its method's body takes) is refused first."""
    try:
        if takes is not None:
            call.refuse_unknown(takes)
        ready = call.registry.ready
        if not ready.is_set():
            await ready.wait()  # kernels left running are being taken back
        if "ref" in call.path and (call.method, call.route) not in UNCHECKED:
            call.refuse_closed(call.path["ref"])
        return await endpoint(call)
    except Exception as e:
        return failure(e, f"{call.method} {call.route}")
