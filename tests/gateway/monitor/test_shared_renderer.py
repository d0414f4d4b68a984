"""One renderer: the monitor page and the MCP Apps view inline the same execution renderer
(loomgate.shared's views/), so what the view gained the monitor shows too: HTML tables rebuilt
from an allowlist, hostile output kept as text."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from importlib.resources import files

import httpx
import pytest
from playwright.async_api import expect

from loomgate.gateway.monitor.page import page as monitor_page
from loomgate.translator.mcp_server.app_document import document as view_document
from tests.support.browser import page_at
from tests.support.cells import run
from tests.support.gateways import GatewayProcess

API = "/api/loomgate"
SEEN = 20_000  # ms
VIEWS = files("loomgate.shared") / "views"


def test_the_monitor_page_and_the_apps_view_inline_the_same_renderer() -> None:
    script = (VIEWS / "execution_view.js").read_text(encoding="utf-8")
    style = (VIEWS / "execution_view.css").read_text(encoding="utf-8")
    page, view = monitor_page().decode("utf-8"), view_document()
    for document in (page, view):
        assert script in document and style in document
        assert document.count("function renderExecution(") == 1  # defined there only
    assert "</script" not in script.lower()  # inlining it cannot end the page's script early


@pytest.fixture
async def named(http: httpx.AsyncClient) -> AsyncIterator[str]:
    """A named kernel on the shared gateway (stopped afterwards); yields its id."""
    r = await http.post(f"{API}/kernels", json={"name": f"renderer-{os.urandom(3).hex()}"})
    kernel = r.json()["kernel"]["id"]
    try:
        yield kernel
    finally:
        await http.delete(f"{API}/kernels/{kernel}")


async def test_the_monitor_renders_tables_and_keeps_hostile_output_as_text(
    gateway: GatewayProcess, http: httpx.AsyncClient, named: str
) -> None:
    code = (
        "from IPython.display import HTML, display\n"
        "print('<script>document.title = 1</script></iframe>')\n"
        "display(HTML('<table><tr><td>ada</td><td onclick=\"x()\">36</td></tr></table>'\n"
        "             '<script>document.title = 2</script><iframe></iframe>'))"
    )
    number = (await run(http, named, code, wait=30))["number"]
    url = f"{gateway.url}/loomgate/monitor?token={gateway.monitor_token}#{named}"
    async with page_at(url) as page:
        card = page.locator(f"#x-{number}")
        await expect(card.locator(".html-output td")).to_have_text(["ada", "36"], timeout=SEEN)
        line = card.locator(".output .l").first
        await expect(line).to_contain_text("<script>document.title = 1</script></iframe>")
        found = await card.evaluate(
            "(card) => [card.querySelectorAll('script, iframe, [onclick]').length, document.title]"
        )
        assert found == [0, "loomgate monitor"]
