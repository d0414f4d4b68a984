"""The plain pool's cookie jar: which Set-Cookie values it keeps and sends back (a table), and
a real Jupyter Server that, given its login cookie back, knows the translator as one user."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from email.utils import format_datetime
from typing import TYPE_CHECKING

import pytest

from loomgate.translator.client.cookies import (
    MAX_COOKIES,
    CookieJar,
    covers,
    domain_matches,
    parse_set_cookie,
)
from loomgate.translator.client.plain_http import PlainHttpPool

if TYPE_CHECKING:
    from tests.support.jupyter_lab import JupyterServerProcess

PREFIX = "/api/loomgate/"
PAST = format_datetime(datetime(2001, 1, 1, tzinfo=timezone.utc), usegmt=True)
FUTURE = format_datetime(datetime(2101, 1, 1, tzinfo=timezone.utc), usegmt=True)


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        ('username-127-0-0-1-8888="2|1:0|10:17|abc"; HttpOnly; Path=/', True),
        ("a=1", True),
        ("a=", True),  # an empty value is a value
        ("a=1; Path=/api/loomgate", True),
        ("a=1; Path=/api/loomgate/kernels", False),  # a narrower path than our requests'
        ("a=1; Path=/api/loom", False),  # not a path prefix by segments
        ("a=1; Path=notapath", True),  # an invalid path attribute is ignored
        ("a=1; Secure; Path=/", False),  # never sent over plain http
        ("a=1; Domain=other.org", False),  # another host's
        ("a=1; Domain=box.example.org", True),  # ours
        ("a=1; Domain=.Example.ORG", True),  # a name we are under
        ("a=1; Domain=ample.org", False),  # a suffix, not a parent name
        ("a=1; Domain=", True),  # an empty attribute is ignored
        ("noequals", False),
        ("=1", False),
        ("a b=1", False),
        ("a=1 2", False),
        ("a=" + "x" * 5000, False),
        (f"a=1; Expires={FUTURE}", True),
        ("a=1; Max-Age=60", True),
        ("a=1; Max-Age=soon", True),  # an unreadable attribute is ignored, the cookie kept
        ("a=1; Expires=someday", True),
    ],
)
def test_which_set_cookie_values_are_kept(line: str, kept: bool) -> None:
    assert (parse_set_cookie(line, PREFIX, "box.example.org") is not None) == kept


@pytest.mark.parametrize(
    ("host", "domain", "matches"),
    [
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "0.0.1", False),  # an IP address has no parent names
        ("localhost", "localhost", True),
        ("a.b.example", "b.example", True),
        ("a.b.example", "example.b", False),
    ],
)
def test_which_domains_take_in_a_host(host: str, domain: str, matches: bool) -> None:
    assert domain_matches(host, domain) is matches


@pytest.mark.parametrize(
    ("path", "prefix", "covered"),
    [
        ("/", "/api/loomgate/", True),
        ("/api", "/api/loomgate/", True),
        ("/api/", "/api/loomgate/", True),
        ("/api/loomgate/", "/api/loomgate/", True),
        ("/ap", "/api/loomgate/", False),
        ("/lab/", "/api/loomgate/", False),
        ("/api/loomgate/x", "/api/loomgate/", False),
    ],
)
def test_which_paths_cover_our_requests(path: str, prefix: str, covered: bool) -> None:
    assert covers(path, prefix) is covered


@pytest.mark.parametrize(
    ("responses", "header"),
    [
        ([], ""),
        ([["a=1; Path=/"]], "Cookie: a=1\r\n"),
        ([["a=1", "b=2"]], "Cookie: a=1; b=2\r\n"),
        ([["a=1"], ["a=2"]], "Cookie: a=2\r\n"),  # replaced
        ([["a=1", "b=2"], ["a=gone; Max-Age=0"]], "Cookie: b=2\r\n"),  # deleted
        ([["a=1"], [f"a=; Expires={PAST}"]], ""),  # deleted as jupyter_server clears it
        ([["a=1; Max-Age=-5"]], ""),  # born expired
        ([["a=1"], ["a=2; Secure"]], "Cookie: a=1\r\n"),  # an unkept value changes nothing
        ([[f"a=1; Expires={PAST}; Max-Age=60"]], "Cookie: a=1\r\n"),  # Max-Age wins
    ],
)
def test_the_jar_sends_back_what_responses_set(responses: list[list[str]], header: str) -> None:
    jar = CookieJar(PREFIX)
    for set_cookies in responses:
        jar.take(set_cookies)
    assert jar.header() == header


def test_a_cookie_that_expires_is_no_longer_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    jar = CookieJar(PREFIX)
    jar.take(["a=1; Max-Age=60", "b=2"])
    assert jar.header() == "Cookie: a=1; b=2\r\n"
    later = time.time() + 61
    monkeypatch.setattr(time, "time", lambda: later)
    assert jar.header() == "Cookie: b=2\r\n"


def test_a_server_cannot_grow_the_jar_without_bound() -> None:
    jar = CookieJar(PREFIX)
    jar.take([f"c{i}=1" for i in range(MAX_COOKIES + 5)])
    assert len(jar.names) == MAX_COOKIES
    jar.take(["c0=2"])  # one it holds can still change
    assert "c0=2" in jar.header()


def test_the_jar_never_shows_a_value() -> None:
    jar = CookieJar(PREFIX)
    jar.take(["login=secret-value"])
    assert "secret-value" not in repr(jar) and "login" in repr(jar)


async def test_a_jupyter_server_knows_the_translator_as_one_user(
    lab: JupyterServerProcess,
) -> None:
    # jupyter_server's /api/me names the user a request was authenticated as. Token-authenticated
    # requests without the login cookie each get a new anonymous user, signed into a new cookie.
    def me() -> PlainHttpPool:
        return PlainHttpPool(f"{lab.url}/api/", lab.headers, connect_timeout=5)

    async def username(pool: PlainHttpPool) -> str:
        status, data = await pool.call("GET", "me", {}, None, timeout=30)
        assert status == 200, data
        return str(data["identity"]["username"])

    pool, other = me(), me()
    try:
        first = await username(pool)
        assert [name.startswith("username-") for name in pool.cookies.names] == [True]
        assert await username(pool) == first == await username(pool)
        assert await username(other) != first  # another client is another user
    finally:
        await pool.aclose()
        await other.aclose()

    # A POST that carries the cookie as well as the token is token-authenticated: no XSRF check.
    kernel_id = lab.open_notebook("one.ipynb")["kernel"]["id"]
    loomgate = PlainHttpPool(f"{lab.url}/api/loomgate/", lab.headers, connect_timeout=5)
    try:
        status, _ = await loomgate.call("GET", "kernels", {}, None, timeout=30)
        assert status == 200 and loomgate.cookies.names
        status, submitted = await loomgate.call(
            "POST", f"kernels/{kernel_id}/executions", {}, {"code": "6 * 7", "wait": 30}, 60
        )
        assert status == 201, submitted
        assert submitted["execution"]["state"] == "completed"
    finally:
        await loomgate.aclose()
