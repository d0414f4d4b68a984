"""One gateway's session: which transport carries a request, how every answer is decoded, the
event stream, and how each way a request can fail becomes one GatewayError sentence.

The typed endpoints are in gateway.py. Requests travel over plain HTTP (plain_http.py) or httpx
(https_transport.py); a plain-http client that makes hot calls also opens the rpc websocket
(rpc.py) and sends what it can over it. The event stream is always HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast
from urllib.parse import urlsplit

from loomgate.shared import wire
from loomgate.shared.events import Event
from loomgate.translator.client.errors import (
    AuthFailed,
    GatewayError,
    NoExtension,
    ProtocolError,
    StreamBroken,
    Timeout,
    Unreachable,
    refusal,
)
from loomgate.translator.client.event_stream import decode_events
from loomgate.translator.client.https_transport import BrokenStream, HttpsTransport
from loomgate.translator.client.plain_http import PlainHttpPool
from loomgate.translator.client.rpc import RpcTransport, import_websockets, is_rpc_method
from loomgate.translator.client.target import TokenSource
from loomgate.translator.client.transport import (
    IS_IT_RUNNING,
    EventTransport,
    Transport,
    TransportFailure,
    connect_reason,
    refused,
)
from loomgate.translator.jupyter_enable import ENABLE_HINT

if TYPE_CHECKING:
    from typing_extensions import Self

log = logging.getLogger(__name__)
T = TypeVar("T")
API_PREFIX = "api/loomgate/"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
CONNECT_TIMEOUT = 5.0
# Kernel starts and resets answer only once the kernel is ready, so plain requests get a minute.
READ_TIMEOUT = 60.0
# A long-poll answers after its wait; the answer then gets this long (at most) to arrive.
LONG_POLL_MARGIN = 30.0
# The event stream sends a keepalive every 5 s; this much silence means the connection is dead.
EVENT_READ_TIMEOUT = 30.0
# A client that has made this many hot calls (submit, follow) opens the rpc: a one-cell CLI run
# (a submit and one follow) never pays for its import and upgrade, a conversation does once, off
# its first cells' path.
HOT_CALLS_BEFORE_RPC = 3


def answer_as(shape: type[T], data: dict[str, Any]) -> T:
    """Return a gateway's JSON object as the wire shape `shape` its endpoint answers with (the
    gateway is trusted to send that shape; nothing is checked)."""
    return cast(T, data)  # the gateway's own shape, trusted


def drop_none(params: Mapping[str, Any]) -> dict[str, Any]:
    """Return `params` without the entries whose value is None."""
    return {key: value for key, value in params.items() if value is not None}


class Closeable(Protocol):
    """Something the client closes with itself (an open hold)."""

    async def aclose(self) -> None:
        """Close it."""


class GatewaySession:
    """The transports to one gateway's /api/loomgate/ endpoints, and its answers decoded."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        verify: bool = True,
        name: str | None = None,
        local: bool = False,
        request_timeout: float = READ_TIMEOUT,
        token_source: TokenSource | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token_source = token_source
        self._token = token
        self._token_lock = asyncio.Lock()
        self.request_timeout = request_timeout
        self.name = name
        self.local = local
        self.verify = verify
        self.client_label: str | None = None  # who the gateway is told sends (the monitor shows it)
        self._holds: set[Closeable] = set()
        self._headers = {"Authorization": f"token {token}"}
        base_url = f"{self.url}/{API_PREFIX}"
        self._http: EventTransport = (
            PlainHttpPool(base_url, self._headers, CONNECT_TIMEOUT)
            if self.url.startswith("http://")
            else HttpsTransport(base_url, self._headers, verify, CONNECT_TIMEOUT)
        )
        self._rpc: RpcTransport | None = None
        self._rpc_absent = False  # the gateway answered the upgrade without an rpc
        self._rpc_lock = asyncio.Lock()
        self._rpc_opening: asyncio.Future[None] | None = None
        self._hot_calls = 0

    @property
    def on_this_host(self) -> bool:
        """Return whether the gateway runs on this machine (so it can use our cwd)."""
        return self.local or urlsplit(self.url).hostname in LOOPBACK_HOSTS

    @property
    def label(self) -> str:
        """Return how to name this gateway to a person: its configured name, else its URL."""
        return self.name or self.url

    @property
    def where(self) -> str:
        """Return "the gateway at URL" or "the gateway 'NAME' at URL", for messages."""
        if self.name:
            return f"the gateway {self.name!r} at {self.url}"
        return f"the gateway at {self.url}"

    @property
    def start_advice(self) -> str:
        """Return what to run when this gateway does not answer at all."""
        if self.local:
            return "is it running? `loomgate gateway start` starts it"
        if self.on_this_host:
            return "is it running? `loomgate gateway start` starts one on this machine"
        return (
            "is it running? Start it on its host with `loomgate gateway start` "
            "(`loomgate gateway install-service` keeps it running)"
        )

    def __repr__(self) -> str:
        """Return the client's label (never its token)."""
        return f"{type(self).__name__}({self.label!r})"

    async def __aenter__(self) -> Self:
        """Return the client itself."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the client."""
        await self.aclose()

    async def aclose(self) -> None:
        """Close every open hold, then the rpc and the HTTP connections; return nothing."""
        for hold in list(self._holds):
            await hold.aclose()
        if self._rpc_opening is not None and not self._rpc_opening.done():
            self._rpc_opening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rpc_opening
        if self._rpc is not None:
            await self._rpc.aclose()
        await self._http.aclose()

    # -- transports --------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        read_timeout: float | None = None,
        hot: bool = False,
    ) -> dict[str, Any]:
        """Return the JSON object the gateway answers (a GatewayError for a refusal or failure).

        `hot` marks the calls a conversation makes per cell (submit, follow): once a client has
        made HOT_CALLS_BEFORE_RPC of them it is a long-lived one, and its rpc opens in the
        background (later requests travel over it once it is open). A refused token is renewed
        from its source (a gateway.json) once, and the request sent again (it never ran)."""
        query = {key: str(value) for key, value in drop_none(params or {}).items()}
        timeout = self.request_timeout if read_timeout is None else read_timeout
        for attempt in (0, 1):
            token = self._token
            try:
                transport = await self._transport_for(method, hot)
                status, data = await transport.call(method, path, query, body, timeout)
            except TransportFailure as e:
                raise self._transport_error(e, timeout) from e
            try:
                return self._decode(status, data, method, path)
            except AuthFailed:
                if attempt or not await self.renew_token(token):
                    raise
        raise AssertionError("unreachable")

    async def renew_token(self, refused: str) -> bool:
        """Take the token its source names now, after `refused` was refused; return whether
        there is another token to try."""
        async with self._token_lock:
            if self._token != refused:
                return True  # another request has renewed it meanwhile
            source = self.token_source
            token = await source.read_again(self.url, refused) if source else None
            if token is None:
                return False
            self._use_token(token)
            log.info("%s has a new token (gateway.json); using it", self.where)
            return True

    def act_for_agent(self) -> None:
        """Mark every request from now on as a model's (wire.AGENT_HEADER), before the first
        call: the gateway refuses it what a model may not do."""
        if self._rpc is not None:
            raise RuntimeError("act_for_agent() comes before the rpc websocket opens")
        self._headers[wire.AGENT_HEADER] = "1"
        self._http.use_headers(self._headers)

    def _use_token(self, token: str) -> None:
        """Send `token` from now on: on HTTP, the event stream and the next rpc upgrade."""
        self._token = token
        self._headers["Authorization"] = f"token {token}"
        self._http.use_headers(self._headers)

    async def request_as(
        self,
        shape: type[T],
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        read_timeout: float | None = None,
        hot: bool = False,
    ) -> T:
        """Return the gateway's answer as the wire shape `shape` (see request)."""
        data = await self.request(
            method, path, params=params, body=body, read_timeout=read_timeout, hot=hot
        )
        return answer_as(shape, data)

    async def _transport_for(self, method: str, hot: bool) -> Transport:
        """Return the rpc when it is open (or was, and opens again), else the HTTP transport."""
        if self._rpc_absent or not is_rpc_method(method) or not self.url.startswith("http://"):
            return self._http
        if self._rpc is not None and not self._rpc.closed:
            return self._rpc
        if self._rpc is not None:
            # It was open and closed (the gateway restarted, say): open it again now, so that a
            # gateway that is gone is reported as refused, which the caller may retry.
            try:
                rpc = await self._open_rpc()
            except TransportFailure as e:
                if e.kind != "token":
                    raise
                return self._http  # whose answer says the token was refused, and renews it
            return rpc if rpc is not None else self._http
        if hot:
            self._hot_calls += 1
            if self._hot_calls >= HOT_CALLS_BEFORE_RPC and self._rpc_opening is None:
                self._rpc_opening = asyncio.ensure_future(self._open_rpc_in_background())
        return self._http

    async def _open_rpc_in_background(self) -> None:
        """Import websockets off the loop, then open the rpc; a failure leaves HTTP in use (a
        later hot call tries again, unless the gateway said it has no rpc)."""
        try:
            await import_websockets()
            await self._open_rpc()
        except (TransportFailure, ImportError) as e:
            log.debug("the rpc to %s did not open (%s); requests stay on HTTP", self.url, e)
            self._rpc_opening = None

    async def _open_rpc(self) -> RpcTransport | None:
        """Open the rpc (once at a time); None if the gateway has none."""
        async with self._rpc_lock:
            if self._rpc is None or self._rpc.closed:
                rpc = await RpcTransport.open(self.url, self._rpc_headers(), CONNECT_TIMEOUT)
                if rpc is None:
                    self._rpc_absent = True
                    return None
                self._rpc = rpc
            return self._rpc

    def _rpc_headers(self) -> dict[str, str]:
        """Return the upgrade's headers: the token, and the cookies HTTP was given."""
        headers = dict(self._headers)
        if isinstance(self._http, PlainHttpPool) and (cookie := self._http.cookies.value()):
            headers["Cookie"] = cookie
        return headers

    def long_poll_margin(self) -> float:
        """Return how long a long-poll's answer may take to arrive once its wait is over."""
        return min(LONG_POLL_MARGIN, self.request_timeout)

    def _transport_error(self, error: TransportFailure, read_timeout: float) -> GatewayError:
        """Return a failure with no answer as one sentence."""
        if error.kind == "timeout":
            return Timeout(f"{self.where} did not answer within {read_timeout:g} s")
        reason, advice = connect_reason(error)
        if advice == IS_IT_RUNNING:
            advice = self.start_advice
        return Unreachable(
            f"cannot reach {self.where} ({reason}); {advice}",
            details={"refused": refused(error)},
        )

    def _decode(self, status: int, data: object, method: str, path: str) -> dict[str, Any]:
        """Return a successful answer's JSON object; raise the error any other answer means."""
        if 200 <= status < 300:
            if isinstance(data, dict):
                return data
            raise ProtocolError(
                f"{self.where} answered {method} /{API_PREFIX}{path} with something "
                "that is not a JSON object",
                status=status,
            )
        if isinstance(data, dict) and isinstance(data.get("error"), str) and "message" in data:
            raise refusal(data, status)
        if status in (401, 403):
            source = self.token_source
            if source is None:
                raise AuthFailed(f"{self.where} refused the token it was given", status=status)
            raise AuthFailed(
                f"{self.where} refused the token {source.named}; {source.advice}", status=status
            )
        if status in (404, 405):
            if isinstance(data, dict) and "reason" in data:
                raise NoExtension(
                    f"{self.url} is a Jupyter server without loomgate's endpoints; {ENABLE_HINT}",
                    status=status,
                )
            raise ProtocolError(
                f"{self.url} is not a loomgate gateway (it has no /{API_PREFIX} endpoints)",
                status=status,
            )
        if status in (502, 503, 504):
            raise Unreachable(
                f"cannot reach {self.where} (its proxy answered HTTP {status}); "
                f"{self.start_advice}",
                status=status,
            )
        raise ProtocolError(
            f"{self.where} answered HTTP {status} to {method} /{API_PREFIX}{path}", status=status
        )

    @contextlib.asynccontextmanager
    async def event_stream(
        self, ref: str | None, *, hold: bool
    ) -> AsyncIterator[AsyncIterator[Event]]:
        """Yield the gateway's events for the kernel `ref` (all kernels if None), holding it if
        `hold`."""
        query = drop_none(
            {
                "kernel": ref,
                "hold": "true" if hold else None,
                "client": self.client_label if hold else None,
            }
        )
        try:
            for attempt in (0, 1):
                token = self._token
                async with self._http.stream("events", query, EVENT_READ_TIMEOUT) as stream:
                    if stream.status != 200:
                        try:
                            self._decode(stream.status, await stream.json(), "GET", "events")
                        except AuthFailed:
                            if attempt or not await self.renew_token(token):
                                raise
                            continue  # the new token opens the stream (a hold keeps on)
                    yield decode_events(stream.lines())
                    return
        except TransportFailure as e:
            raise self._transport_error(e, EVENT_READ_TIMEOUT) from e
        except BrokenStream as e:
            raise StreamBroken(f"{self.where} sent a broken event stream ({e})") from e

    def track(self, hold: Closeable, *, open: bool) -> None:
        """Note that `hold` opened or closed (an open hold is closed with the client)."""
        if open:
            self._holds.add(hold)
        else:
            self._holds.discard(hold)
