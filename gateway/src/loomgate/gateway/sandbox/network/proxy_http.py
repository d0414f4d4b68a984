"""The HTTP side of the kernel's proxy, on h11: where a request goes (CONNECT host:port, or an
absolute-form http:// URL), the head forwarded to the origin (origin-form, hop-by-hop headers
dropped, `Connection: close`: one request per connection), the origin's response head rewritten
the same way, and the proxy's own answers, whose reason phrase is their sentence (curl and pip
print it)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import h11

__all__ = ["ProxyRequest", "ResponseHeads", "answer", "parse_request"]

HEAD_LIMIT = 64 * 1024  # a request or response head larger than this is refused
# Headers of one hop only (RFC 9110 7.6.1), and those a Connection header names. Transfer-Encoding
# and Content-Length stay: a body passes unchanged, framed as its sender framed it.
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization"}
    | {"te", "upgrade"}
)
FRAMING = frozenset({"content-length", "transfer-encoding", "host"})  # never dropped


class BadRequest(ValueError):
    """A request the proxy cannot serve: `status` and the sentence to answer with."""

    def __init__(self, status: int, sentence: str) -> None:
        super().__init__(sentence)
        self.status = status


@dataclass(frozen=True)
class ProxyRequest:
    """Where a client's request goes, and for a forwarded one the head to send the origin."""

    host: str
    port: int
    tunnel: bool  # CONNECT: relay bytes both ways once answered
    head: bytes = b""  # the origin-form request head (not for a tunnel)


def parse_request(head: bytes) -> ProxyRequest:
    """Return where the request whose head (blank line included) is `head` goes; BadRequest
    when it cannot be served."""
    parser = h11.Connection(h11.SERVER)
    parser.receive_data(head)
    try:
        request = parser.next_event()
    except h11.RemoteProtocolError as error:
        raise BadRequest(400, f"the proxy could not read the request: {error}") from None
    assert isinstance(request, h11.Request)  # a whole head is a request or an error
    method, target = request.method.decode(), request.target.decode("ascii")
    tunnel = method == "CONNECT"
    if not tunnel and not target.lower().startswith("http://"):
        raise BadRequest(
            400,
            f"{target} is not an absolute http:// URL: ask this proxy for http://host/path, "
            "or CONNECT host:port (for https)",
        )
    url = urlsplit(f"//{target}" if tunnel else target)
    try:
        host, port = url.hostname, url.port or (None if tunnel else 80)
    except ValueError:
        host = port = None
    if not host or port is None:
        raise BadRequest(400, f"{target} does not name a host and a port")
    if tunnel:
        return ProxyRequest(host, port, True)
    authority = url.netloc.rpartition("@")[2]
    rest = target[len("http://") + len(url.netloc) :]
    path = rest if rest.startswith("/") else "/" + rest
    headers = forwarded(request.headers.raw_items())
    if not any(name.lower() == b"host" for name, _ in headers):
        headers.insert(0, (b"Host", authority.encode()))
    line = b"%s %s HTTP/%s\r\n" % (request.method, path.encode(), request.http_version)
    return ProxyRequest(host, port, False, line + joined(headers))


class ResponseHeads:
    """The origin's answer to a forwarded request, for the client: the final head rewritten
    (`Connection: close`, no hop-by-hop headers), 1xx heads as they are, then the body as is."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.done = False
        self.sent_any = False

    def feed(self, data: bytes) -> bytes:
        """Return what to send the client for `data` (ValueError: a head h11 cannot read)."""
        self.buffer += data
        out = b""
        while not self.done and (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head = bytes(self.buffer[: end + 4])
            del self.buffer[: end + 4]
            parser = h11.Connection(h11.CLIENT)
            parser.send(h11.Request(method="GET", target="/", headers=[("Host", "origin")]))
            parser.receive_data(head)
            try:
                event = parser.next_event()
            except h11.RemoteProtocolError as error:
                raise ValueError(str(error)) from None
            if isinstance(event, h11.InformationalResponse):
                out += head
                continue
            assert isinstance(event, h11.Response)
            status = b"HTTP/%s %d %s\r\n" % (event.http_version, event.status_code, event.reason)
            out += status + joined(forwarded(event.headers.raw_items()))
            self.done = True
        if not self.done and len(self.buffer) > HEAD_LIMIT:
            raise ValueError("the origin's response head is too large")
        if self.done:
            out += bytes(self.buffer)
            self.buffer.clear()
        self.sent_any = self.sent_any or bool(out)
        return out

    def cut_short(self) -> bytes:
        """Return the answer when the origin closes before its response head."""
        return answer(502, "the origin closed the connection without answering")


def answer(status: int, sentence: str) -> bytes:
    """Return the proxy's own response: `status`, the sentence as its reason and body."""
    reason = sentence.encode("ascii", "replace").replace(b"\r", b" ").replace(b"\n", b" ")
    body = sentence.encode() + b"\n"
    headers = [
        (b"Content-Type", b"text/plain; charset=utf-8"),
        (b"Content-Length", str(len(body)).encode()),
        (b"Connection", b"close"),
    ]
    return b"HTTP/1.1 %d %s\r\n" % (status, reason) + joined(headers) + body


def forwarded(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Return `headers` without the hop-by-hop ones, ending with `Connection: close`."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.decode("latin-1").split(",")
    }
    dropped = HOP_BY_HOP | (named - FRAMING)
    kept = [(n, v) for n, v in headers if n.decode("latin-1").lower() not in dropped]
    return [*kept, (b"Connection", b"close")]


def joined(headers: list[tuple[bytes, bytes]]) -> bytes:
    """Return header lines and the blank line that ends a head."""
    return b"".join(name + b": " + value + b"\r\n" for name, value in headers) + b"\r\n"
