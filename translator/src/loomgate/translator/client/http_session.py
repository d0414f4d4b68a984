"""One gateway's HTTP session: requests over the lean pool or httpx, the event stream, refusals.

The typed endpoints are in gateway.py; this module owns how a request travels and how every
way it can fail becomes one GatewayError sentence.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from loomgate.shared.events import Event
from loomgate.translator.client.channel import Channel
from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.transport import (
    IS_IT_RUNNING,
    PlainHttpPool,
    PlainResponse,
    TransportFailure,
    causes,
    connect_reason,
    decode_events,
    httpx_failure,
)
from loomgate.translator.presentation.kernels import ENABLE_HINT

if TYPE_CHECKING:
    import httpx
    from typing_extensions import Self

API_PREFIX = "api/loomgate/"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
CONNECT_TIMEOUT = 5.0
# Kernel starts and resets answer only once the kernel is ready, so plain requests get a minute.
READ_TIMEOUT = 60.0
# A long-poll answers after its wait; the answer then gets this long (at most) to arrive.
LONG_POLL_MARGIN = 30.0
# The event stream sends a keepalive every 5 s; this much silence means the connection is dead.
EVENT_READ_TIMEOUT = 30.0


def drop_none(params: Mapping[str, Any]) -> dict[str, Any]:
    """Return `params` without the entries whose value is None."""
    return {key: value for key, value in params.items() if value is not None}


class Closeable(Protocol):
    """Something the client closes with itself (an open hold)."""

    async def aclose(self) -> None:
        """Close it."""


class GatewayHttp:
    """The HTTP side of one gateway's /api/loomgate/ endpoints, on keep-alive connections."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        verify: bool = True,
        name: str | None = None,
        local: bool = False,
        request_timeout: float = READ_TIMEOUT,
    ) -> None:
        self.url = url.rstrip("/")
        self.request_timeout = request_timeout
        self.name = name
        self.local = local
        self.verify = verify
        self.client_label: str | None = None  # who the gateway is told sends (the monitor shows it)
        self._holds: set[Closeable] = set()
        self._headers = {"Authorization": f"token {token}"}
        self._plain = (
            PlainHttpPool(f"{self.url}/{API_PREFIX}", self._headers, CONNECT_TIMEOUT)
            if self.url.startswith("http://")
            else None
        )
        self._httpx: httpx.AsyncClient | None = None
        self._channel: Channel | None = None
        self._channel_absent = False  # the gateway answered the upgrade without a channel
        self._channel_opening = asyncio.Lock()

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
        """Close every open hold, then the HTTP connection pool; return nothing."""
        for hold in list(self._holds):
            await hold.aclose()
        if self._channel is not None:
            await self._channel.aclose()
        if self._plain is not None:
            await self._plain.aclose()
        if self._httpx is not None:
            await self._httpx.aclose()

    # -- transport ---------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        """Return the httpx client (for https gateways), made on first use.

        Importing httpx and building its client take 0.15 s, which a translator of a plain-http
        gateway never pays.
        """
        if self._httpx is None:
            import httpx

            self._httpx = httpx.AsyncClient(
                base_url=f"{self.url}/{API_PREFIX}",
                headers=self._headers,
                # Plain http never does TLS, so it need not load the CA bundle (~50 ms).
                verify=self.verify if self._plain is None else False,
                timeout=httpx.Timeout(self.request_timeout, connect=CONNECT_TIMEOUT),
                follow_redirects=False,
            )
        return self._httpx

    async def _httpx_request(
        self,
        method: str,
        path: str,
        query: dict[str, Any],
        data: dict[str, Any] | None,
        read_timeout: float,
    ) -> httpx.Response:
        """Send one request through httpx (https gateways); TransportFailure if it fails."""
        import httpx

        timeout = httpx.Timeout(read_timeout, connect=CONNECT_TIMEOUT)
        try:
            return await self._http().request(
                method, path, params=query, json=data, timeout=timeout
            )
        except httpx.TransportError as e:
            raise httpx_failure(e) from e

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        read_timeout: float | None = None,
        channel_call: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Return the JSON object the gateway answers (GatewayError for a refusal or failure).

        `channel_call` names the same request as a call on the channel (its args are the body,
        else the query), which carries it when the gateway has one (http:// gateways).
        """
        query = drop_none(params or {})
        data = dict(body) if body is not None else None
        if read_timeout is None:
            read_timeout = self.request_timeout
        try:
            response: httpx.Response | PlainResponse | None = None
            if self._plain is not None and channel_call is not None:
                call = {**channel_call, "args": data if data is not None else query}
                response = await self._over_channel(call, read_timeout)
            if response is None and self._plain is not None:
                response = await self._plain.request(
                    method, path, params=query, body=data, read_timeout=read_timeout
                )
            elif response is None:
                response = await self._httpx_request(method, path, query, data, read_timeout)
        except TransportFailure as e:
            raise self._transport_error(e, read_timeout) from e
        return self._decode(response, method, path)

    async def _over_channel(
        self, call: dict[str, Any], read_timeout: float
    ) -> PlainResponse | None:
        """Return the answer to `call` over the channel (opened on first use), or None when the
        gateway has no channel; TransportFailure as for HTTP."""
        assert self._plain is not None
        if self._channel_absent:
            return None
        async with self._channel_opening:
            if self._channel is None or self._channel.closed:
                self._channel = await Channel.open(self._plain, CONNECT_TIMEOUT)
                if self._channel is None:
                    self._channel_absent = True
                    return None
            channel = self._channel
        return await channel.call(call, read_timeout)

    def long_poll_margin(self) -> float:
        """Return how long a long-poll's answer may take to arrive once its wait is over."""
        return min(LONG_POLL_MARGIN, self.request_timeout)

    def _transport_error(self, error: TransportFailure, read_timeout: float) -> GatewayError:
        """Return a failure with no HTTP answer as one sentence."""
        if error.kind == "timeout":
            return GatewayError(
                f"{self.where} did not answer within {read_timeout:g} s", code="timeout"
            )
        reason, advice = connect_reason(error)
        if advice == IS_IT_RUNNING:
            advice = self.start_advice
        # Refused: the request never reached a gateway, so sending it again cannot repeat it.
        refused = any(isinstance(cause, ConnectionRefusedError) for cause in causes(error))
        return GatewayError(
            f"cannot reach {self.where} ({reason}); {advice}",
            code="unreachable",
            details={"refused": refused},
        )

    def _decode(
        self, response: httpx.Response | PlainResponse, method: str, path: str
    ) -> dict[str, Any]:
        try:
            data: Any = response.json()
        except ValueError:
            data = None
        status = response.status_code
        if response.is_success:
            if isinstance(data, dict):
                return data
            raise GatewayError(
                f"{self.where} answered {method} /{API_PREFIX}{path} with something "
                "that is not a JSON object",
                code="protocol",
                status=status,
            )
        if isinstance(data, dict) and isinstance(data.get("error"), str) and "message" in data:
            details = {k: v for k, v in data.items() if k not in ("error", "message")}
            raise GatewayError(
                str(data["message"]), code=data["error"], status=status, details=details
            )
        if status in (401, 403):
            raise GatewayError(
                f"{self.where} refused the token; check LOOMGATE_TOKEN / token_env "
                "for this gateway",
                code="auth",
                status=status,
            )
        if status in (404, 405):
            jupyter = isinstance(data, dict) and "reason" in data
            message = (
                f"{self.url} is a Jupyter server without loomgate's endpoints; {ENABLE_HINT}"
                if jupyter
                else f"{self.url} is not a loomgate gateway (it has no /{API_PREFIX} endpoints)"
            )
            raise GatewayError(message, code="protocol", status=status)
        if status in (502, 503, 504):
            raise GatewayError(
                f"cannot reach {self.where} (its proxy answered HTTP {status}); "
                f"{self.start_advice}",
                code="unreachable",
                status=status,
            )
        raise GatewayError(
            f"{self.where} answered HTTP {status} to {method} /{API_PREFIX}{path}",
            code="protocol",
            status=status,
        )

    @contextlib.asynccontextmanager
    async def event_stream(
        self, kernel: str | None, *, hold: bool
    ) -> AsyncIterator[AsyncIterator[Event]]:
        """Yield the gateway's events for `kernel` (all kernels if None), holding it if `hold`."""
        params = drop_none(
            {
                "kernel": kernel,
                "hold": "true" if hold else None,
                "client": self.client_label if hold else None,
            }
        )
        if self._plain is not None:
            try:
                async with self._plain.stream(
                    "events", params=params, idle_timeout=EVENT_READ_TIMEOUT
                ) as stream:
                    if stream.status_code != 200:
                        self._decode(await stream.read(), "GET", "events")
                    yield decode_events(stream.lines())
            except TransportFailure as e:
                raise self._transport_error(e, EVENT_READ_TIMEOUT) from e
            return
        import httpx

        timeout = httpx.Timeout(EVENT_READ_TIMEOUT, connect=CONNECT_TIMEOUT)
        try:
            async with self._http().stream("GET", "events", params=params, timeout=timeout) as r:
                if r.status_code != 200:
                    await r.aread()
                    self._decode(r, "GET", "events")
                yield decode_events(r.aiter_lines())
        except httpx.TransportError as e:
            raise self._transport_error(httpx_failure(e), EVENT_READ_TIMEOUT) from e
        except httpx.HTTPError as e:  # a body that breaks HTTP (a bad chunk, say)
            message = f"{self.where} sent a broken event stream ({e})"
            raise GatewayError(message, code="stream") from e

    def track(self, hold: Closeable, *, open: bool) -> None:
        """Note that `hold` opened or closed (an open hold is closed with the client)."""
        if open:
            self._holds.add(hold)
        else:
            self._holds.discard(hold)
