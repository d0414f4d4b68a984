"""The monitor credential: a second token that opens the GET endpoints the monitor page reads
and nothing else (executing, interrupting, restarting, deleting, input, holding a kernel, the
kernel websocket and the rpc websocket all answer 403 to it). handlers/monitor.py gives it to
whoever holds the full token (`loomgate monitor` of a gateway given by URL)."""

from __future__ import annotations

from jupyter_server.auth.identity import User
from tornado import web

MONITOR_USERNAME = "loomgate-monitor"
MONITOR_USER = User(
    username=MONITOR_USERNAME, name="monitor", display_name="loomgate monitor (read-only)"
)
READ_METHODS = frozenset({"GET", "HEAD"})
READ_ONLY = (
    "the monitor token can only read what the monitor page shows; to run, change or hold "
    "kernels, send the gateway's own token (`loomgate gateway token` prints it)"
)


class MonitorReadOnly(web.HTTPError):
    """The answer to the monitor token on a request it may not make: 403 and READ_ONLY (not
    tornado's "'_xsrf' argument missing", which a POST without a known user gets)."""

    def __init__(self) -> None:
        super().__init__(403, READ_ONLY)  # no % in it: Jupyter writes it unformatted


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
