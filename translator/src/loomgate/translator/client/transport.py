"""The one seam between the gateway session and the wire: a Transport carries a JSON request and
brings back the status and JSON body the gateway answered, or fails with a TransportFailure.

Its implementations: the rpc websocket (rpc.py), keep-alive plain HTTP (plain_http.py) and
httpx for https (https_transport.py). The session decodes every answer the same way, whichever
carried it. The event stream is HTTP only (an EventTransport).
"""

from __future__ import annotations

import contextlib
import errno
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Literal, Protocol, TypeVar

# A deadline that cancels what runs inside it, and raises TimeoutError: asyncio.wait_for before
# Python 3.12 can swallow a cancellation that arrives as the read completes (a hold being closed
# would read on). asyncio.timeout (3.11) is a cancel scope; on 3.10, anyio's (whose asyncio
# backend costs the CLI imports, which is why it is not used everywhere).
if sys.version_info >= (3, 11):
    from asyncio import timeout as deadline
else:

    @contextlib.asynccontextmanager
    async def deadline(seconds: float | None) -> AsyncIterator[None]:
        """Cancel the block after `seconds`; raise TimeoutError then."""
        import anyio

        with anyio.fail_after(seconds):
            yield


T = TypeVar("T")
# connect_timeout: no connection in time; timeout: no answer in time; dropped: the connection
# broke or did not speak the protocol (the request may have arrived); failed: anything else
# (the exception's cause says what, a refused connection among them).
# token: the rpc's upgrade refused the token (HTTP's answer then says so, and renews it).
FailureKind = Literal["connect_timeout", "timeout", "dropped", "failed", "token"]


class TransportFailure(Exception):
    """A request that got no answer; `kind` says how it failed."""

    def __init__(self, message: str, kind: FailureKind) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind


class Transport(Protocol):
    """Carries one JSON request to a gateway's /api/loomgate/ and brings back its answer."""

    async def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: Mapping[str, object] | None,
        timeout: float,
    ) -> tuple[int, object]:
        """Return the answer's status and its JSON body (None when the body is not JSON);
        TransportFailure when no answer comes. `path` is relative to /api/loomgate/."""
        ...

    async def aclose(self) -> None:
        """Close the transport's connections."""
        ...


class StreamResponse(Protocol):
    """A response whose body is read as it comes (the event stream)."""

    status: int

    async def json(self) -> object:
        """Return the whole body decoded as JSON (None when it is not JSON)."""
        ...

    def lines(self) -> AsyncIterator[str]:
        """Return the body's lines as they arrive, without their line ends."""
        ...


class EventTransport(Transport, Protocol):
    """A transport that can also hold a GET open and read its body as it comes."""

    def use_headers(self, headers: Mapping[str, str]) -> None:
        """Send `headers` (a renewed token) with every later request."""
        ...

    def stream(
        self, path: str, query: Mapping[str, str], idle_timeout: float
    ) -> AbstractAsyncContextManager[StreamResponse]:
        """Return the streamed response to a GET; TransportFailure when the connection breaks
        or stays silent longer than `idle_timeout`, also while the body is read."""
        ...


async def within(read: Awaitable[T], seconds: float | None) -> T:
    """Return what `read` returns; TransportFailure if that takes longer than `seconds`."""
    try:
        async with deadline(seconds):
            return await read
    except TimeoutError:
        raise TransportFailure(f"nothing received within {seconds:g} s", "timeout") from None


def causes(error: BaseException) -> list[BaseException]:
    """Return `error` and the exceptions it was raised from, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def refused(error: BaseException) -> bool:
    """Return whether the connection was refused: the request never reached a gateway, so
    sending it again cannot repeat it."""
    return any(isinstance(cause, ConnectionRefusedError) for cause in causes(error))


IS_IT_RUNNING = "is it running?"


def connect_reason(error: TransportFailure) -> tuple[str, str]:
    """Return (what went wrong, what to do) for a failed connection, in plain words
    (IS_IT_RUNNING where the gateway may simply be down)."""
    if error.kind == "connect_timeout":
        return "connection timed out", "is it running and reachable?"
    for cause in causes(error):
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused", IS_IT_RUNNING
        if isinstance(cause, socket.gaierror):
            return "unknown host", "check the URL"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return (
                f"TLS: {cause.verify_message or 'certificate verify failed'}",
                "set verify = false for this gateway in gateways.toml "
                "to accept a self-signed certificate",
            )
        if isinstance(cause, ssl.SSLError):
            reason = (cause.reason or str(cause)).lower().replace("_", " ")
            return f"TLS: {reason}", "check that the URL's scheme (http or https) is right"
        if isinstance(cause, OSError) and cause.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "no route to the host", "is the network up?"
    if error.kind == "dropped":
        return f"the connection was dropped: {error}", IS_IT_RUNNING
    return str(error), IS_IT_RUNNING
