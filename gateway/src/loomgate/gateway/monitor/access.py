"""The monitor credential: a second token that opens the GET endpoints the monitor page reads
and nothing else (executing, interrupting, restarting, deleting, input, holding a kernel, the
kernel websocket and the rpc websocket all answer 403 to it)."""

from __future__ import annotations

from jupyter_server.auth.identity import User
from tornado import web

MONITOR_USERNAME = "loomgate-monitor"
MONITOR_USER = User(
    username=MONITOR_USERNAME, name="monitor", display_name="loomgate monitor (read-only)"
)
READ_METHODS = frozenset({"GET", "HEAD"})


def monitor_may(handler: web.RequestHandler) -> bool:
    """Return whether the monitor credential may make this request.

    Only GETs of handlers that say they are `monitor_readable`, and never one that would hold
    a kernel (holding keeps a conversation kernel alive: that is not reading).
    """
    if handler.request.method not in READ_METHODS:
        return False
    if not getattr(handler, "monitor_readable", False):
        return False
    return handler.get_query_argument("hold", "false").lower() in ("0", "false", "no")


def is_monitor(user: object) -> bool:
    """Return whether `user` is the monitor's read-only user."""
    return isinstance(user, User) and user.username == MONITOR_USERNAME
