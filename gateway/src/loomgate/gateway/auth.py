"""Token authentication as jupyter_server does it, minus per-request work API clients never use,
plus the monitor's read-only credential."""

from __future__ import annotations

import secrets

from jupyter_server.auth.identity import IdentityProvider, User
from tornado import web

from loomgate.gateway.monitor.access import (
    MONITOR_USER,
    MonitorReadOnly,
    is_monitor,
    monitor_may,
)


class LoomIdentityProvider(IdentityProvider):
    """jupyter_server's IdentityProvider without a new user and a signed cookie per API call.

    loomgate's clients send the token in the Authorization header of every request, so they
    never use a login cookie; one anonymous user stands for all of them. A browser that logs in
    with `?token=` still gets its cookie. The monitor token (`monitor_token`, empty when there
    is none) identifies the read-only monitor user, on the requests `monitor_may` allows only;
    it never gets a cookie, so the page sends it with every request.
    """

    _shared_user: User | None = None
    monitor_token: str = ""

    async def get_user_token(self, handler: web.RequestHandler) -> User | None:
        """Return the user the request's token identifies: the full token's, else the monitor's
        (where it may read; MonitorReadOnly, a 403 saying so, anywhere else), else None."""
        user = await super().get_user_token(handler)
        if user is not None or not self.monitor_token:
            return user
        given = self.get_token(handler) or ""
        if secrets.compare_digest(given.encode(), self.monitor_token.encode()):
            if monitor_may(handler):
                return MONITOR_USER
            raise MonitorReadOnly
        return None

    def generate_anonymous_user(self, handler: web.RequestHandler) -> User:
        """Return the one anonymous user of token-authenticated requests (made on first use)."""
        if self._shared_user is None:
            self._shared_user = super().generate_anonymous_user(handler)
        return self._shared_user

    def set_login_cookie(self, handler: web.RequestHandler, user: User) -> None:
        """Set the login cookie, unless the request carried its token in a header (or it is the
        monitor's, which must be sent each time)."""
        if "Authorization" not in handler.request.headers and not is_monitor(user):
            super().set_login_cookie(handler, user)


def monitor_token_of(identity: IdentityProvider) -> str:
    """Return the monitor token of a server's identity provider ("" when it has none, as any
    provider but loomgate's own)."""
    return identity.monitor_token if isinstance(identity, LoomIdentityProvider) else ""
