"""Token authentication as jupyter_server does it, minus per-request work API clients never use."""

from __future__ import annotations

from jupyter_server.auth.identity import IdentityProvider, User
from tornado import web


class LoomIdentityProvider(IdentityProvider):
    """jupyter_server's IdentityProvider without a new user and a signed cookie per API call.

    loomgate's clients send the token in the Authorization header of every request, so they
    never use a login cookie; one anonymous user stands for all of them. A browser that logs in
    with `?token=` still gets its cookie.
    """

    _shared_user: User | None = None

    def generate_anonymous_user(self, handler: web.RequestHandler) -> User:
        """Return the one anonymous user of token-authenticated requests (made on first use)."""
        if self._shared_user is None:
            self._shared_user = super().generate_anonymous_user(handler)
        return self._shared_user

    def set_login_cookie(self, handler: web.RequestHandler, user: User) -> None:
        """Set the login cookie, unless the request carried its token in a header."""
        if "Authorization" not in handler.request.headers:
            super().set_login_cookie(handler, user)
