"""The async HTTP client of one loomgate gateway: its endpoints, its refusals, and kernel holds."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from loomgate.translator.http_connection import (
    PlainHttpPool,
    PlainResponse,
    TransportFailure,
    connect_reason,
    httpx_failure,
)

if TYPE_CHECKING:
    import httpx

    from loomgate.translator.kernel_hold import Hold

log = logging.getLogger(__name__)

API_PREFIX = "api/loomgate/"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
CONNECT_TIMEOUT = 5.0
# Kernel starts and resets answer only once the kernel is ready, so plain requests get a minute.
READ_TIMEOUT = 60.0
# A long-poll answers after its wait; the answer then gets this long (at most) to arrive.
LONG_POLL_MARGIN = 30.0
# A submit may wait up to 30 s for the kernel to start the cell before its own wait begins.
SUBMIT_START_MARGIN = 30.0
# The event stream sends a keepalive every 5 s; this much silence means the connection is dead.
EVENT_READ_TIMEOUT = 30.0
HOLD_BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0)
HOLD_OPEN_TIMEOUT = 30.0
# Refusals after which reconnecting a hold cannot help.
PERMANENT_HOLD_ERRORS = frozenset({"not_found", "bad_request", "ambiguous", "auth", "protocol"})

EventCallback = Callable[[dict[str, Any]], Awaitable[None] | None]


class GatewayError(Exception):
    """A gateway refusal or failure: a stable `code` and one sentence for a model or a person."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        """Return the one-sentence message."""
        return self.message

    def __repr__(self) -> str:
        """Return the code and message, for debugging."""
        return f"GatewayError({self.code!r}, {self.message!r}, status={self.status!r})"


def quoted(ref: str | int) -> str:
    """Return a kernel reference or execution selector as one URL path segment."""
    return quote(str(ref), safe="")


def drop_none(params: Mapping[str, Any]) -> dict[str, Any]:
    """Return `params` without the entries whose value is None."""
    return {key: value for key, value in params.items() if value is not None}


def wait_params(
    wait: float, until_silent: float | None, head: int, tail: int, max_chars: int | None
) -> dict[str, Any]:
    """Return the long-poll and output arguments shared by submit and execution requests."""
    return {
        "wait": wait,
        "until_silent": until_silent,
        "head": head,
        "tail": tail,
        "max_chars": max_chars,
    }


async def decode_events(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """Return the decoded `data:` payloads of a server-sent event line stream."""
    data: list[str] = []
    async for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            try:
                event = json.loads("\n".join(data))
            except ValueError:
                event = None
            data = []
            if isinstance(event, dict):
                yield event


class GatewayClient:
    """An async client of one gateway's /api/loomgate/ endpoints over one keep-alive connection."""

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
        self._holds: set[Hold] = set()
        self._headers = {"Authorization": f"token {token}"}
        self._plain = (
            PlainHttpPool(f"{self.url}/{API_PREFIX}", self._headers, CONNECT_TIMEOUT)
            if self.url.startswith("http://")
            else None
        )
        self._httpx: httpx.AsyncClient | None = None

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

    def __repr__(self) -> str:
        """Return the client's label (never its token)."""
        return f"GatewayClient({self.label!r})"

    async def __aenter__(self) -> GatewayClient:
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

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
        read_timeout: float | None = None,
    ) -> dict[str, Any]:
        query = drop_none(params or {})
        data = dict(body) if body is not None else None
        if read_timeout is None:
            read_timeout = self.request_timeout
        try:
            response: httpx.Response | PlainResponse
            if self._plain is not None:
                response = await self._plain.request(
                    method, path, params=query, body=data, read_timeout=read_timeout
                )
            else:
                response = await self._httpx_request(method, path, query, data, read_timeout)
        except TransportFailure as e:
            raise self._transport_error(e, read_timeout) from e
        return self._decode(response, method, path)

    def _long_poll_margin(self) -> float:
        """Return how long a long-poll's answer may take to arrive once its wait is over."""
        return min(LONG_POLL_MARGIN, self.request_timeout)

    def _transport_error(self, error: TransportFailure, read_timeout: float) -> GatewayError:
        if error.kind == "timeout":
            return GatewayError(
                f"{self.where} did not answer within {read_timeout:g} s", code="timeout"
            )
        reason, advice = connect_reason(error)
        return GatewayError(f"cannot reach {self.where} ({reason}); {advice}", code="unreachable")

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
                f"{self.url} is a Jupyter server without loomgate's endpoints"
                if jupyter
                else f"{self.url} is not a loomgate gateway (it has no /{API_PREFIX} endpoints)"
            )
            raise GatewayError(message, code="protocol", status=status)
        if status in (502, 503, 504):
            raise GatewayError(
                f"cannot reach {self.where} (its proxy answered HTTP {status}); is it running?",
                code="unreachable",
                status=status,
            )
        raise GatewayError(
            f"{self.where} answered HTTP {status} to {method} /{API_PREFIX}{path}",
            code="protocol",
            status=status,
        )

    @contextlib.asynccontextmanager
    async def _event_stream(
        self, kernel: str | None, *, hold: bool
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        params = drop_none({"kernel": kernel, "hold": "true" if hold else None})
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

    # -- gateway and kernels -----------------------------------------------------------------

    async def info(self) -> dict[str, Any]:
        """Return the gateway's info (service, version, protocol, capabilities, kernel specs)."""
        data = await self._request("GET", "info")
        if data.get("service") != "loomgate":
            raise GatewayError(
                f"{self.url} answers /{API_PREFIX}info but is not a loomgate gateway",
                code="protocol",
            )
        return data

    async def list_kernels(self, all: bool = False) -> dict[str, Any]:
        """Return {"kernels": [model…]}: live kernels, with `all` also gone ones with records."""
        return await self._request("GET", "kernels", params={"all": "true" if all else None})

    async def create_kernel(
        self,
        name: str | None = None,
        kernel_spec: str | None = None,
        lifetime: str = "persistent",
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Return (kernel model, created): the live kernel called `name`, or a new one."""
        body = drop_none(
            {
                "name": name,
                "kernel_spec": kernel_spec,
                "lifetime": lifetime,
                "cwd": cwd,
                "env": dict(env) if env is not None else None,
            }
        )
        data = await self._request("POST", "kernels", body=body)
        return data["kernel"], bool(data.get("created"))

    async def get_kernel(self, ref: str) -> dict[str, Any]:
        """Return {"kernel": model} for the kernel `ref` names (live or gone)."""
        return await self._request("GET", f"kernels/{quoted(ref)}")

    async def stop_kernel(self, ref: str) -> dict[str, Any]:
        """Return {"kernel": gone model} after stopping the kernel `ref` names."""
        return await self._request("DELETE", f"kernels/{quoted(ref)}")

    async def interrupt(self, ref: str) -> dict[str, Any]:
        """Return {"execution": summary} of the execution interrupted, as the interrupt was sent."""
        return await self._request("POST", f"kernels/{quoted(ref)}/interrupt")

    async def reset(self, ref: str) -> dict[str, Any]:
        """Return {"kernel": model, "killed": summary or None} once the new process is ready."""
        return await self._request("POST", f"kernels/{quoted(ref)}/reset")

    # -- executions --------------------------------------------------------------------------

    async def submit(
        self,
        ref: str,
        code: str,
        *,
        wait: float = 0,
        until_silent: float | None = None,
        head: int = 0,
        tail: int = 0,
        max_chars: int | None = None,
    ) -> dict[str, Any]:
        """Return {"execution": summary, "returned": reason} for a newly submitted cell."""
        body = drop_none({"code": code, **wait_params(wait, until_silent, head, tail, max_chars)})
        return await self._request(
            "POST",
            f"kernels/{quoted(ref)}/executions",
            body=body,
            read_timeout=wait + SUBMIT_START_MARGIN + self._long_poll_margin(),
        )

    async def execution(
        self,
        ref: str,
        selector: str | int = "current",
        *,
        wait: float = 0,
        until_silent: float | None = None,
        head: int = 0,
        tail: int = 0,
        max_chars: int | None = None,
    ) -> dict[str, Any]:
        """Return {"execution": summary, "returned": reason}, long-polling up to `wait` s."""
        params = wait_params(wait, until_silent, head, tail, max_chars)
        return await self._request(
            "GET",
            f"kernels/{quoted(ref)}/executions/{quoted(selector)}",
            params=params,
            read_timeout=wait + self._long_poll_margin(),
        )

    async def executions(self, ref: str, since: int = 0, limit: int = 100) -> dict[str, Any]:
        """Return {"executions": [summary…]}: the newest `limit` numbered above `since`."""
        return await self._request(
            "GET", f"kernels/{quoted(ref)}/executions", params={"since": since, "limit": limit}
        )

    async def read(
        self,
        ref: str,
        selector: str | int,
        stream: str = "combined",
        lines: str | None = None,
        max_chars: int | None = None,
    ) -> dict[str, Any]:
        """Return a line range of one stream: {number, state, total, range, first, last, lines…}."""
        return await self._request(
            "GET",
            f"kernels/{quoted(ref)}/executions/{quoted(selector)}/streams/{quoted(stream)}",
            params={"lines": lines, "max_chars": max_chars},
        )

    async def rich(self, ref: str, selector: str | int, index: int) -> dict[str, Any]:
        """Return one rich output: its `rich` entry plus `data` and `metadata`."""
        return await self._request(
            "GET", f"kernels/{quoted(ref)}/executions/{quoted(selector)}/rich/{int(index)}"
        )

    async def send_input(self, ref: str, selector: str | int, value: str) -> dict[str, Any]:
        """Return {"execution": summary} after answering the execution's pending input()."""
        return await self._request(
            "POST",
            f"kernels/{quoted(ref)}/executions/{quoted(selector)}/input",
            body={"value": value},
        )

    async def search(
        self,
        ref: str,
        query: str,
        *,
        execution: str | int = "current",
        stream: str = "combined",
        mode: str = "auto",
        context: int = 0,
        ignore_case: bool = False,
        max_matches: int = 50,
    ) -> dict[str, Any]:
        """Return the search result: {query, mode, stream, matches, truncated, groups, searched}."""
        params = {
            "query": query,
            "execution": str(execution),
            "stream": stream,
            "mode": mode,
            "context": context,
            "ignore_case": "true" if ignore_case else "false",
            "max_matches": max_matches,
        }
        return await self._request("GET", f"kernels/{quoted(ref)}/search", params=params)

    def hold(self, kernel_id: str, on_event: EventCallback | None = None) -> Hold:
        """Return a (not yet open) hold on `kernel_id`; open it with `async with` or `open()`."""
        from loomgate.translator.kernel_hold import Hold

        return Hold(self, kernel_id, on_event)

    def event_stream(
        self, kernel: str | None, *, hold: bool
    ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[dict[str, Any]]]:
        """Return the gateway's event stream for `kernel` (held when `hold`), as a context."""
        return self._event_stream(kernel, hold=hold)

    def track(self, hold: Hold, *, open: bool) -> None:
        """Note that `hold` opened or closed (an open hold is closed with the client)."""
        if open:
            self._holds.add(hold)
        else:
            self._holds.discard(hold)
