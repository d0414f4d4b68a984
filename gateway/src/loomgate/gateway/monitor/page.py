"""The monitor page: one HTML document with its stylesheet and script inlined, from `static/`
and the execution renderer it shares with the MCP Apps view (loomgate.shared's `views/`)."""

from __future__ import annotations

import functools
from importlib.resources import files

from jupyter_server.base.handlers import JupyterHandler

STATIC = files("loomgate.gateway.monitor") / "static"
SHARED_VIEWS = files("loomgate.shared") / "views"
REFUSAL = (
    "This is loomgate's monitor page; open it with the address `loomgate monitor` prints "
    "(it carries the read-only monitor token).\n"
)


@functools.cache
def page() -> bytes:
    """Return the page: monitor.html with the shared renderer, monitor.css and monitor.js put in
    place."""
    html = (STATIC / "monitor.html").read_text(encoding="utf-8")
    css = (SHARED_VIEWS / "execution_view.css").read_text(encoding="utf-8")
    css += (STATIC / "monitor.css").read_text(encoding="utf-8")
    script = (SHARED_VIEWS / "execution_view.js").read_text(encoding="utf-8")
    script += (STATIC / "monitor.js").read_text(encoding="utf-8")
    return html.replace("/*STYLE*/", css).replace("/*SCRIPT*/", script).encode("utf-8")


class MonitorPageHandler(JupyterHandler):
    """GET /loomgate/monitor: the page (403 without the monitor or the full token)."""

    monitor_readable = True

    def get(self) -> None:
        """Send the page; it reads everything else from the API with the token in its URL."""
        if not self.current_user:
            self.set_status(403)
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish(REFUSAL)
            return
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        self.set_header("Referrer-Policy", "no-referrer")  # the token is in the page's URL
        self.finish(page())
