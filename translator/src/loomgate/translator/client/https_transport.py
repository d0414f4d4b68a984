"""The transport of https gateways: httpx, imported and built on first use (plain-http
translators never pay for it), its failures made TransportFailures of their kind."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from loomgate.translator.client.transport import TransportFailure

if TYPE_CHECKING:
    import httpx


def httpx_failure(error: httpx.TransportError) -> TransportFailure:
    """Return an httpx transport error as the TransportFailure of its kind, caused by it."""
    import httpx

    if isinstance(error, httpx.ConnectTimeout):
        failure = TransportFailure("connection timed out", "connect_timeout")
    elif isinstance(error, httpx.TimeoutException):
        failure = TransportFailure(str(error) or type(error).__name__, "timeout")
    elif isinstance(error, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        failure = TransportFailure(str(error) or type(error).__name__, "dropped")
    else:
        failure = TransportFailure(str(error) or type(error).__name__, "failed")
    failure.__cause__ = error
    return failure


class BrokenStream(Exception):
    """A streamed body that broke HTTP itself (a bad chunk, say)."""


class HttpxStream:
    """A streamed httpx response: its status, and its body whole or line by line."""

    def __init__(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self._response = response

    async def json(self) -> object:
        """Return the whole body decoded as JSON, or None."""
        await self._response.aread()
        try:
            return self._response.json()
        except ValueError:
            return None

    def lines(self) -> AsyncIterator[str]:
        """Return the body's lines as they arrive."""
        return self._response.aiter_lines()


class HttpsTransport:
    """Requests to one https (or any non-plain) gateway's /api/loomgate/, through httpx."""

    def __init__(
        self, base_url: str, headers: Mapping[str, str], verify: bool, connect_timeout: float
    ) -> None:
        self._base_url = base_url
        self._headers = dict(headers)
        self._verify = verify
        self._connect_timeout = connect_timeout
        self._client: httpx.AsyncClient | None = None

    def use_headers(self, headers: Mapping[str, str]) -> None:
        """Send `headers` on every later request."""
        self._headers = dict(headers)
        if self._client is not None:
            self._client.headers.update(self._headers)

    def _http(self) -> httpx.AsyncClient:
        """Return the httpx client, made on first use."""
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(
                base_url=self._base_url,
                headers=self._headers,
                verify=self._verify,
                timeout=httpx.Timeout(60.0, connect=self._connect_timeout),
                follow_redirects=False,
            )
        return self._client

    async def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: Mapping[str, object] | None,
        timeout: float,
    ) -> tuple[int, object]:
        """Send one request; return its status and JSON body (TransportFailure if none came)."""
        import httpx

        try:
            response = await self._http().request(
                method,
                path,
                params=dict(query),
                json=dict(body) if body is not None else None,
                timeout=httpx.Timeout(timeout, connect=self._connect_timeout),
            )
        except httpx.TransportError as e:
            raise httpx_failure(e) from e
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, query: Mapping[str, str], idle_timeout: float
    ) -> AsyncIterator[HttpxStream]:
        """Yield the streamed response to a GET (TransportFailure if the connection fails,
        BrokenStream if its body breaks HTTP)."""
        import httpx

        timeout = httpx.Timeout(idle_timeout, connect=self._connect_timeout)
        try:
            async with self._http().stream("GET", path, params=dict(query), timeout=timeout) as r:
                yield HttpxStream(r)
        except httpx.TransportError as e:
            raise httpx_failure(e) from e
        except httpx.HTTPError as e:
            raise BrokenStream(str(e)) from e

    async def aclose(self) -> None:
        """Close httpx's connections."""
        if self._client is not None:
            await self._client.aclose()
