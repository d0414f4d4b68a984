"""The HTTP side of the kernel's proxy, as tables: where a request goes, the head forwarded to
the origin, the origin's response head rewritten, and the proxy's own answers."""

from __future__ import annotations

import pytest

from loomgate.gateway.sandbox.network.proxy_http import (
    HEAD_LIMIT,
    BadRequest,
    ProxyRequest,
    ResponseHeads,
    answer,
    forwarded,
    parse_request,
)


@pytest.mark.parametrize(
    ("head", "request_"),
    [
        (b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n",
         ProxyRequest("pypi.org", 443, True)),
        (b"CONNECT [::1]:8080 HTTP/1.1\r\nHost: x\r\n\r\n", ProxyRequest("::1", 8080, True)),
        (b"CONNECT 10.0.0.5:22 HTTP/1.0\r\n\r\n", ProxyRequest("10.0.0.5", 22, True)),
        (b"GET http://Example.COM/simple/x/?a=1&b=%20 HTTP/1.1\r\nHost: example.com\r\n"
         b"Proxy-Connection: Keep-Alive\r\nAccept: */*\r\n\r\n",
         ProxyRequest("example.com", 80, False,
                      b"GET /simple/x/?a=1&b=%20 HTTP/1.1\r\nHost: example.com\r\n"
                      b"Accept: */*\r\nConnection: close\r\n\r\n")),
        (b"GET http://127.0.0.1:8080 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
         ProxyRequest("127.0.0.1", 8080, False,
                      b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nConnection: close\r\n\r\n")),
        (b"GET http://u:p@h.org:81?q HTTP/1.0\r\n\r\n",  # HTTP/1.0: no Host, one is added
         ProxyRequest("h.org", 81, False,
                      b"GET /?q HTTP/1.0\r\nHost: h.org:81\r\nConnection: close\r\n\r\n")),
        (b"POST http://h.org/up HTTP/1.1\r\nHost: h.org\r\nTransfer-Encoding: chunked\r\n"
         b"Connection: keep-alive, X-Hop, Transfer-Encoding\r\nX-Hop: 1\r\nTE: trailers\r\n"
         b"Upgrade: websocket\r\nProxy-Authorization: Basic eA==\r\nKeep-Alive: 5\r\n\r\n",
         ProxyRequest("h.org", 80, False,
                      b"POST /up HTTP/1.1\r\nHost: h.org\r\nTransfer-Encoding: chunked\r\n"
                      b"Connection: close\r\n\r\n")),
    ],
)  # fmt: skip
def test_where_a_request_goes(head: bytes, request_: ProxyRequest) -> None:
    assert parse_request(head) == request_


@pytest.mark.parametrize(
    ("head", "status", "says"),
    [
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400, "/ is not an absolute http:// URL"),
        (b"GET https://x/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "https://x/ is not an absolute"),
        (b"GET ftp://x/ HTTP/1.1\r\nHost: x\r\n\r\n", 400, "ftp://x/ is not an absolute"),
        (b"CONNECT pypi.org HTTP/1.1\r\nHost: x\r\n\r\n", 400, "pypi.org does not name a host and"),
        (b"CONNECT pypi.org:https HTTP/1.1\r\nHost: x\r\n\r\n", 400, "pypi.org:https does not"),
        (b"CONNECT :443 HTTP/1.1\r\nHost: x\r\n\r\n", 400, ":443 does not name a host and"),
        (b"GET http:///x HTTP/1.1\r\nHost: x\r\n\r\n", 400, "http:///x does not name a host"),
        (b"GET http://x/ HTTP/1.1\r\n\r\n", 400, "the proxy could not read the request"),
        (b"NONSENSE\r\n\r\n", 400, "the proxy could not read the request"),
        (b"GET http://x/ HTTP/2\r\nHost: x\r\n\r\n", 400, "the proxy could not read the request"),
    ],
)
def test_a_request_the_proxy_cannot_serve(head: bytes, status: int, says: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_request(head)
    assert refused.value.status == status
    assert str(refused.value).startswith(says)


@pytest.mark.parametrize(
    ("chunks", "out"),
    [
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nKeep-Alive: timeout=5\r\n\r\nabc"],
         b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"),
        ([b"HTTP/1.1 200 OK\r\nTransfer-Enc", b"oding: chunked\r\n\r", b"\n3\r\nabc\r\n",
          b"0\r\n\r\n"],
         b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
         b"3\r\nabc\r\n0\r\n\r\n"),
        ([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nConnection: keep-alive\r\n"
          b"Proxy-Authenticate: Basic\r\nContent-Length: 0\r\n\r\n"],
         b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
         b"Connection: close\r\n\r\n"),
        ([b"HTTP/1.0 200 OK\r\n\r\n", b"until the end"],
         b"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nuntil the end"),
    ],
)  # fmt: skip
def test_the_response_head_is_rewritten_and_the_body_passes(
    chunks: list[bytes], out: bytes
) -> None:
    heads = ResponseHeads()
    sent = b"".join(heads.feed(chunk) for chunk in chunks)
    assert sent == out
    assert heads.done and heads.sent_any


@pytest.mark.parametrize(
    "data", [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"SSH-2.0-OpenSSH\r\n\r\n", b"x" * 70000]
)
def test_an_origin_that_does_not_speak_http_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        ResponseHeads().feed(data)


def test_an_origin_that_ends_before_its_head_gets_a_502() -> None:
    heads = ResponseHeads()
    assert heads.feed(b"HTTP/1.1 200") == b""
    assert not heads.sent_any
    assert heads.cut_short().startswith(
        b"HTTP/1.1 502 the origin closed the connection without answering\r\n"
    )


@pytest.mark.parametrize(
    ("status", "sentence", "line"),
    [
        (403, "10.0.0.5 is a private address, which profile 'w' does not name",
         b"HTTP/1.1 403 10.0.0.5 is a private address, which profile 'w' does not name\r\n"),
        (502, "bücher.example could not be\r\nresolved",
         b"HTTP/1.1 502 b?cher.example could not be  resolved\r\n"),
    ],
)  # fmt: skip
def test_the_proxys_own_answer_says_its_sentence(status: int, sentence: str, line: bytes) -> None:
    response = answer(status, sentence)
    head, _, body = response.partition(b"\r\n\r\n")
    assert response.startswith(line)
    assert body == sentence.encode() + b"\n"
    assert f"Content-Length: {len(body)}".encode() in head and b"Connection: close" in head


def test_framing_headers_are_never_dropped_even_when_connection_names_them() -> None:
    headers = [(b"Content-Length", b"5"), (b"Connection", b"content-length, host"), (b"Host", b"h")]
    assert forwarded(headers) == [
        (b"Content-Length", b"5"),
        (b"Host", b"h"),
        (b"Connection", b"close"),
    ]


# What the tables above leave open (each test fails on a mutant of proxy_http.py that
# bench/mutation.py found alive without it).
def test_a_request_that_is_not_an_absolute_url_is_told_what_to_ask_for() -> None:
    with pytest.raises(BadRequest) as refused:
        parse_request(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert str(refused.value) == (
        "/x is not an absolute http:// URL: ask this proxy for http://host/path, or CONNECT "
        "host:port (for https)"
    )


def test_the_host_added_is_what_follows_the_last_at_sign() -> None:
    request = parse_request(b"GET http://a@b@h.org/x HTTP/1.0\r\n\r\n")
    assert request.head == b"GET /x HTTP/1.0\r\nHost: h.org\r\nConnection: close\r\n\r\n"


def test_every_informational_head_passes_before_the_final_one() -> None:
    early = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
    final = b"HTTP/1.1 204 No Content\r\n\r\n"
    heads = ResponseHeads()
    assert (
        heads.feed(early + final) == early + b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
    )


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\r\n\r\nHTTP/1.1 200 OK\r\n\r\n", "no response line received"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "illegal status line"),
    ],
)
def test_an_unreadable_response_head_says_what_h11_found(data: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ResponseHeads().feed(data)


def test_a_response_head_may_fill_the_limit_but_not_pass_it() -> None:
    heads = ResponseHeads()
    assert heads.feed(b"HTTP/1.1 200 OK\r\nX: " + b"x" * (HEAD_LIMIT - 20)) == b""
    assert len(heads.buffer) == HEAD_LIMIT
    with pytest.raises(ValueError) as refused:
        heads.feed(b"x")
    assert str(refused.value) == "the origin's response head is too large"


def test_the_proxys_own_answer_is_plain_text() -> None:
    head = answer(403, "refused").partition(b"\r\n\r\n")[0]
    assert b"\r\nContent-Type: text/plain; charset=utf-8\r\n" in head
