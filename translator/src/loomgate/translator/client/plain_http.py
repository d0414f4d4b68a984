"""A lean keep-alive HTTP/1.1 transport for plain-http gateways, and their event stream.

It does only what the gateway's endpoints need: JSON requests (bodies by Content-Length, chunked
or ended by the connection closing; keep-alive; the cookies the server sets sent back as
cookies.py keeps them) and the event stream read line by line. The maintained protocol
libraries were measured beside it (bench/plain_http_bench.py, bench/results/plain_http.md): h11
and httpx cost more per call than the issue's bound, and their imports would sit on the
start-up path, so this stays. TLS gateways use httpx (https_transport.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Literal
from urllib.parse import urlencode, urlsplit

from loomgate.translator.client.cookies import CookieJar
from loomgate.translator.client.transport import TransportFailure, deadline, within

MAX_HEADER_BYTES = 64 << 10
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def json_or_none(body: bytes) -> object:
    """Return `body` decoded as JSON, or None when it is not JSON."""
    try:
        return json.loads(body)
    except ValueError:
        return None


class PlainHttpPool:
    """Keep-alive connections to one http:// origin; one request per connection at a time."""

    def __init__(self, base_url: str, headers: dict[str, str], connect_timeout: float) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.prefix = parts.path.rstrip("/") + "/"
        self._host_header = f"{self.host}:{self.port}" if ":" not in self.host else f"[{self.host}]"
        self.use_headers(headers)
        self.cookies = CookieJar(self.prefix, self.host)
        self.connect_timeout = connect_timeout
        self._idle: list[Connection] = []

    def use_headers(self, headers: Mapping[str, str]) -> None:
        """Send `headers` (with the host) on every later request."""
        fields = {"Host": self._host_header, **headers}
        self._head = "".join(f"{k}: {v}\r\n" for k, v in fields.items())

    def request_head(self) -> str:
        """Return the header lines every request carries (host, token, cookies)."""
        return self._head + self.cookies.header()

    async def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: Mapping[str, object] | None,
        timeout: float,
    ) -> tuple[int, object]:
        """Send one request; return its status and JSON body (TransportFailure if none came)."""
        target = self.prefix + path + (f"?{urlencode(query)}" if query else "")
        payload = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {target} HTTP/1.1\r\n{self.request_head()}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        message = head.encode() + b"\r\n" + payload
        for attempt in (0, 1):
            reused = attempt == 0 and bool(self._idle)  # a retry always takes a new one
            connection = self._idle.pop() if reused else await self.connect()
            try:
                async with deadline(timeout):
                    response, keep = await self._exchange(connection, message)
            except TimeoutError:
                connection[1].close()
                raise TransportFailure(f"no answer within {timeout:g} s", "timeout") from None
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

    async def _exchange(
        self, connection: Connection, message: bytes
    ) -> tuple[tuple[int, object], bool]:
        """Return the answer to `message` and whether the connection may carry another."""
        reader, writer = connection
        writer.write(message)
        status, headers, set_cookies = await read_head(reader)
        if set_cookies:
            self.cookies.take(set_cookies)
        framing = body_framing(status, headers)
        if framing == "chunked":
            body = await read_chunked(reader)
        elif framing == "close":
            body = await reader.read()  # the body ends with the connection
        else:
            body = await reader.readexactly(framing)
        keep = framing != "close" and "close" not in tokens(headers.get("connection", ""))
        return (status, json_or_none(body)), keep

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, query: Mapping[str, str], idle_timeout: float
    ) -> AsyncIterator[PlainStream]:
        """Yield the response to a GET whose body is read as it comes, on its own connection.

        Every read may wait `idle_timeout` s; TransportFailure when the connection breaks or stays
        silent longer, also while the body is being read.
        """
        target = self.prefix + path + (f"?{urlencode(query)}" if query else "")
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
        self.status = status
        self._headers = headers
        self._reader = reader
        self._idle_timeout = idle_timeout

    async def json(self) -> object:
        """Return the whole body decoded as JSON (an error's answer, say), or None."""
        return json_or_none(b"".join([part async for part in self._parts()]))

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
        framing = body_framing(self.status, self._headers)
        if framing == "chunked":
            async for chunk in chunks(reader, seconds):
                yield chunk
        elif framing == "close":
            while part := await within(reader.read(1 << 16), seconds):
                yield part
        else:
            yield await within(reader.readexactly(framing), seconds)


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
    headers: dict[str, str] = {}
    set_cookies = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            key, value = name.strip().lower(), value.strip()
            if key == "set-cookie":
                set_cookies.append(value)  # its values may hold commas: never combined
            elif key in headers:
                headers[key] = f"{headers[key]}, {value}"  # a repeated header is one list
            else:
                headers[key] = value
    return status, headers, set_cookies


def tokens(value: str) -> list[str]:
    """Return a comma-separated header value's items, lower-cased."""
    return [item.strip().lower() for item in value.split(",") if item.strip()]


def body_framing(status: int, headers: Mapping[str, str]) -> int | Literal["chunked", "close"]:
    """Return how a response's body ends: after N bytes, with its last chunk, or when the
    server closes the connection (RFC 9112 §6.3); TransportFailure if the headers disagree."""
    if status in (204, 304) or 100 <= status < 200:
        return 0
    codings = tokens(headers.get("transfer-encoding", ""))
    if codings:
        return "chunked" if codings[-1] == "chunked" else "close"
    if "content-length" not in headers:
        return "close"
    lengths = set(tokens(headers["content-length"]))
    if len(lengths) != 1 or not next(iter(lengths)).isdigit():
        raise TransportFailure(f"a broken Content-Length: {headers['content-length']!r}", "dropped")
    return int(lengths.pop())


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
