"""The execution view's HTML document: app.html with its style and scripts inlined, the shared
execution renderer (loomgate.shared's views/, which the monitor page loads too) among them."""

from __future__ import annotations

import functools
from importlib.resources import files

APP_STATIC = files("loomgate.translator.mcp_server") / "app_static"
SHARED_VIEWS = files("loomgate.shared") / "views"


@functools.cache
def document() -> str:
    """Return the view: one self-contained document (no fetches; inline style and script)."""
    html = (APP_STATIC / "app.html").read_text(encoding="utf-8")
    style = (SHARED_VIEWS / "execution_view.css").read_text(encoding="utf-8") + (
        APP_STATIC / "app.css"
    ).read_text(encoding="utf-8")
    script = (SHARED_VIEWS / "execution_view.js").read_text(encoding="utf-8") + (
        APP_STATIC / "app.js"
    ).read_text(encoding="utf-8")
    return html.replace("/*STYLE*/", style).replace("/*SCRIPT*/", script)
