"""The cookies an http:// gateway's server sets, sent back on later requests as a browser is.

A Jupyter Server that authenticates a request by its token also sets its login cookie, naming
the (anonymous) user it made for that request. A client that never sends it back makes the
server mint and sign a new user on every request (a measurable part of a trivial cell, see
docs/architecture.md), and each request is someone else. httpx, which serves https
gateways, keeps cookies by default; the plain pool keeps them with this jar. The token still goes
with every request, so the server authenticates each one by it; the cookies live in memory only,
are never logged, and are sent only to the server that set them (also on the rpc's upgrade,
which the server authenticates once per connection).

Kept by hand rather than with http.cookiejar: that module imports urllib.request, which the CLI
would pay for on the first cookie of a person's Jupyter server (bench/results/plain_http.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from email.utils import parsedate_to_datetime

MAX_COOKIES = 20  # a server setting more gets only the first ones back
MAX_COOKIE_BYTES = 4096  # a longer name=value is not kept (RFC 6265's least a client keeps)


class CookieJar:
    """The cookies one origin set (for paths under `prefix`), as a Cookie header."""

    def __init__(self, prefix: str, host: str = "") -> None:
        self.prefix = prefix
        self.host = host.lower()
        self._cookies: dict[str, tuple[str, float | None]] = {}  # name → (value, expires at)
        self._header = ""
        self._next_expiry: float | None = None

    def __repr__(self) -> str:
        """Return the names of the cookies held (never their values)."""
        return f"CookieJar({self.names})"

    @property
    def names(self) -> list[str]:
        """Return the names of the cookies held, sorted."""
        return sorted(self._cookies)

    def header(self) -> str:
        """Return the Cookie header line to send ("" when there are no cookies)."""
        if self._next_expiry is not None and time.time() >= self._next_expiry:
            self._changed()
        return self._header

    def value(self) -> str:
        """Return the Cookie header's value ("" when there are no cookies)."""
        return self.header().removeprefix("Cookie: ").removesuffix("\r\n")

    def take(self, set_cookies: Iterable[str]) -> None:
        """Keep, replace or delete cookies as a response's Set-Cookie header values say."""
        for line in set_cookies:
            parsed = parse_set_cookie(line, self.prefix, self.host)
            if parsed is None:
                continue
            name, value, expires = parsed
            if expires is not None and expires <= time.time():
                self._cookies.pop(name, None)
            elif name in self._cookies or len(self._cookies) < MAX_COOKIES:
                self._cookies[name] = (value, expires)
        self._changed()

    def _changed(self) -> None:
        """Drop the expired cookies and render the header of the rest."""
        now = time.time()
        self._cookies = {
            name: (value, expires)
            for name, (value, expires) in self._cookies.items()
            if expires is None or expires > now
        }
        expiries = [expires for _, expires in self._cookies.values() if expires is not None]
        self._next_expiry = min(expiries, default=None)
        pairs = "; ".join(f"{name}={value}" for name, (value, _) in self._cookies.items())
        self._header = f"Cookie: {pairs}\r\n" if pairs else ""


def parse_set_cookie(
    line: str, prefix: str, host: str = ""
) -> tuple[str, str, float | None] | None:
    """Return a Set-Cookie value's (name, value, expiry time or None), or None where a browser
    on plain http would not keep it for `prefix` on `host`: malformed, too long, Secure, a
    Domain that `host` is not in, or a path that does not cover `prefix`."""
    pair, *attributes = line.split(";")
    name, equals, value = pair.partition("=")
    name, value = name.strip(), value.strip()
    if not equals or not name or len(name) + len(value) > MAX_COOKIE_BYTES:
        return None
    if any(ord(c) < 0x21 or ord(c) > 0x7E or c in ",;" for c in name + value.strip('"')):
        return None  # what a header line could not carry back safely
    expires: float | None = None
    max_age: float | None = None
    for attribute in attributes:
        key, _, argument = attribute.partition("=")
        key, argument = key.strip().lower(), argument.strip()
        if key == "secure":
            return None  # never sent over plain http
        if key == "domain" and argument and not domain_matches(host, argument):
            return None  # set for other hosts (RFC 6265 §5.3 step 6); ours gets it alone
        if key == "path" and not covers(argument, prefix):
            return None
        if key == "max-age":
            try:
                max_age = float(int(argument))
            except ValueError:
                continue
        elif key == "expires":
            try:
                expires = parsedate_to_datetime(argument).timestamp()
            except (TypeError, ValueError):
                continue
    if max_age is not None:  # Max-Age wins over Expires (RFC 6265 §5.3)
        expires = time.time() + max_age
    return name, value, expires


def domain_matches(host: str, domain: str) -> bool:
    """Return whether `host` is in a cookie's `domain` (RFC 6265 §5.1.3): the same name, or a
    name under it (never for an IP address)."""
    domain = domain.lower().removeprefix(".")
    if host == domain:
        return True
    is_ip = host.replace(".", "").isdigit() or ":" in host
    return not is_ip and host.endswith("." + domain)


def covers(path: str, prefix: str) -> bool:
    """Return whether a cookie of `path` is sent with requests under `prefix` (RFC 6265 §5.1.4)."""
    if not path.startswith("/"):
        return True  # an invalid path attribute is ignored: the default path is ours
    return prefix == path or (
        prefix.startswith(path) and (path.endswith("/") or prefix[len(path)] == "/")
    )
