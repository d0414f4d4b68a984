"""A lean keep-alive HTTP/1.1 client for plain-http gateways, server-sent events, failures.

httpx spends ~1 ms of CPU per request in its connection-pool and async-library plumbing: on a
loopback gateway that is a fifth of a trivial cell. This pool does only what the gateway's
endpoints need: JSON requests (Content-Length or chunked bodies, keep-alive, the cookies the
server sets sent back as cookies.py keeps them) and the event stream read line by line. It does
not import httpx (importing it and building its client take 0.15 s, which used to delay a new
conversation's first cell): it fails with TransportFailure, which the gateway client also makes
of httpx's errors, so both are reported the same way. TLS gateways use httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast
from urllib.parse import urlencode, urlsplit

from loomgate.shared.events import Event
from loomgate.translator.client.cookies import CookieJar

if TYPE_CHECKING:
    import httpx

# A deadline that cancels what runs inside it, and raises TimeoutError: asyncio.wait_for before
# Python 3.12 can swallow a cancellation that arrives as the read completes (a hold being closed
# would read on). asyncio.timeout (3.11) is a cancel scope; on 3.10, anyio's (whose asyncio
# backend costs the CLI 20 ms of imports, which is why it is not used everywhere).
if sys.version_info >= (3, 11):
    from asyncio import timeout as deadline
else:

    @contextlib.asynccontextmanager
    async def deadline(seconds: float | None) -> AsyncIterator[None]:
        """Cancel the block after `seconds`; raise TimeoutError then."""
        import anyio

        with anyio.fail_after(seconds):
            yield


MAX_HEADER_BYTES = 64 << 10
T = TypeVar("T")
# connect_timeout: no connection in time; timeout: no answer in time; dropped: the connection
# broke or did not speak HTTP; failed: anything else (the exception's cause says what).
FailureKind = Literal["connect_timeout", "timeout", "dropped", "failed"]


class TransportFailure(Exception):
    """A request that got no HTTP response; `kind` says how it failed."""

    def __init__(self, message: str, kind: FailureKind) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind


class PlainResponse:
    """A decoded response: status and body (the parts the gateway client reads)."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status_code = status
        self.content = body

    @property
    def is_success(self) -> bool:
        """Return whether the status is 2xx."""
        return 200 <= self.status_code < 300

    def json(self) -> Any:
        """Return the body decoded as JSON (ValueError if it is not)."""
        return json.loads(self.content)


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class PlainHttpPool:
    """Keep-alive connections to one http:// origin; one request per connection at a time."""

    def __init__(self, base_url: str, headers: dict[str, str], connect_timeout: float) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/") + "/"
        host_header = f"{self.host}:{self.port}" if ":" not in self.host else f"[{self.host}]"
        self._head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": host_header, **headers}.items())
        self.cookies = CookieJar(self.prefix)
        self.connect_timeout = connect_timeout
        self._idle: list[Connection] = []

    def request_head(self) -> str:
        """Return the header lines every request carries (host, token, cookies)."""
        return self._head + self.cookies.header()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any],
        body: dict[str, Any] | None,
        read_timeout: float,
    ) -> PlainResponse:
        """Send one request; return its response (TransportFailure when there is none)."""
        target = self.prefix + path + (f"?{urlencode(params)}" if params else "")
        payload = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {target} HTTP/1.1\r\n{self.request_head()}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        message = head.encode() + b"\r\n" + payload
        for attempt in (0, 1):
            reused = attempt == 0 and bool(self._idle)  # a retry always takes a new one
            connection = self._idle.pop() if reused else await self.connect()
            try:
                async with deadline(read_timeout):
                    response, keep = await self._exchange(connection, message)
            except TimeoutError:
                connection[1].close()
                raise TransportFailure(f"no answer within {read_timeout:g} s", "timeout") from None
            except (ConnectionError, asyncio.IncompleteReadError) as e:
                connection[1].close()
                if reused and attempt == 0:
                    # The server closed an idle keep-alive connection (a timeout, or it is gone):
                    # the other idle ones are as stale, so the retry opens a new connection.
                    await self.aclose()
                    continue
                raise TransportFailure(f"the connection was closed: {e}", "dropped") from e
            except BaseException:
                connection[1].close()  # cancelled or broken mid-exchange: never reuse it
                raise
            if keep:
                self._idle.append(connection)
            else:
                connection[1].close()
            return response
        raise AssertionError("unreachable")

    async def connect(self) -> Connection:
        """Return a new connection to the origin (TransportFailure if it cannot be made)."""
        try:
            return await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), self.connect_timeout
            )
        except asyncio.TimeoutError:
            raise TransportFailure("connection timed out", "connect_timeout") from None
        except OSError as e:
            raise TransportFailure(str(e) or type(e).__name__, "failed") from e

    async def _exchange(self, connection: Connection, message: bytes) -> tuple[PlainResponse, bool]:
        reader, writer = connection
        writer.write(message)
        status, headers, set_cookies = await read_head(reader)
        if set_cookies:
            self.cookies.take(set_cookies)
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = await read_chunked(reader)
        else:
            body = await reader.readexactly(int(headers.get("content-length", "0")))
        keep = headers.get("connection", "").lower() != "close"
        return PlainResponse(status, body), keep

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, *, params: dict[str, Any], idle_timeout: float
    ) -> AsyncIterator[PlainStream]:
        """Yield the response to a GET whose body is read as it comes, on its own connection.

        Every read may wait `idle_timeout` s; TransportFailure when the connection breaks or stays
        silent longer, also while the body is being read.
        """
        target = self.prefix + path + (f"?{urlencode(params)}" if params else "")
        reader, writer = await self.connect()
        try:
            head = f"GET {target} HTTP/1.1\r\n{self.request_head()}\r\n"
            writer.write(head.encode())
            status, headers, set_cookies = await within(read_head(reader), idle_timeout)
            if set_cookies:
                self.cookies.take(set_cookies)
            yield PlainStream(status, headers, reader, idle_timeout)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            raise TransportFailure(f"the connection was closed: {e}", "dropped") from e
        finally:
            writer.close()

    async def aclose(self) -> None:
        """Close the idle connections."""
        for _, writer in self._idle:
            writer.close()
        self._idle.clear()


class PlainStream:
    """A response being received: its status, and its body whole or line by line."""

    def __init__(
        self,
        status: int,
        headers: dict[str, str],
        reader: asyncio.StreamReader,
        idle_timeout: float,
    ) -> None:
        self.status_code = status
        self._headers = headers
        self._reader = reader
        self._idle_timeout = idle_timeout

    async def read(self) -> PlainResponse:
        """Return the whole response (an error's JSON body, say)."""
        parts = [part async for part in self._parts()]
        return PlainResponse(self.status_code, b"".join(parts))

    async def lines(self) -> AsyncIterator[str]:
        """Return the body's lines as they arrive, without their line ends."""
        rest = b""
        async for part in self._parts():
            *complete, rest = (rest + part).split(b"\n")
            for line in complete:
                yield line.removesuffix(b"\r").decode("utf-8", errors="replace")
        if rest:
            yield rest.decode("utf-8", errors="replace")

    async def _parts(self) -> AsyncIterator[bytes]:
        """Return the body in the pieces the server sent, each within the timeout."""
        reader, seconds = self._reader, self._idle_timeout
        if self._headers.get("transfer-encoding", "").lower() == "chunked":
            async for chunk in chunks(reader, seconds):
                yield chunk
        elif "content-length" in self._headers:
            length = int(self._headers["content-length"])
            yield await within(reader.readexactly(length), seconds)
        else:
            while part := await within(reader.read(1 << 16), seconds):
                yield part


async def within(read: Awaitable[T], seconds: float | None) -> T:
    """Return what `read` returns; TransportFailure if that takes longer than `seconds`."""
    try:
        async with deadline(seconds):
            return await read
    except TimeoutError:
        raise TransportFailure(f"nothing received within {seconds:g} s", "timeout") from None


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], list[str]]:
    """Return a response's status, its (lower-cased) headers, and its Set-Cookie values (a
    header that may come more than once)."""
    head = await reader.readuntil(b"\r\n\r\n")
    if len(head) > MAX_HEADER_BYTES:
        raise TransportFailure("response headers too large", "dropped")
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError):
        raise TransportFailure(f"not an HTTP response: {lines[0][:80]!r}", "dropped") from None
    headers = {}
    set_cookies = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            key = name.strip().lower()
            headers[key] = value.strip()
            if key == "set-cookie":
                set_cookies.append(value.strip())
    return status, headers, set_cookies


async def chunks(reader: asyncio.StreamReader, seconds: float | None) -> AsyncIterator[bytes]:
    """Return the chunks of a chunked body (its end read too), each within `seconds`."""
    while True:
        line = await within(reader.readuntil(b"\r\n"), seconds)
        try:
            size = int(line.split(b";")[0], 16)
        except ValueError:
            raise TransportFailure(f"a broken chunk header: {line[:40]!r}", "dropped") from None
        if size == 0:
            await within(reader.readuntil(b"\r\n"), seconds)
            return
        chunk = await within(reader.readexactly(size + 2), seconds)
        yield chunk[:-2]


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    """Return a chunked transfer-encoded body."""
    return b"".join([chunk async for chunk in chunks(reader, None)])


def causes(error: BaseException) -> list[BaseException]:
    """Return `error` and the exceptions it was raised from, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


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


async def decode_events(lines: AsyncIterator[str]) -> AsyncIterator[Event]:
    """Return the events of a server-sent event line stream (their `data:` JSON objects)."""
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
                yield cast(Event, event)
