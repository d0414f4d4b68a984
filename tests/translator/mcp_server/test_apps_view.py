"""The MCP Apps view in a real host: headless Chromium, a host page built on the official
`@modelcontextprotocol/ext-apps` app-bridge (installed by `npm ci` from apps_host/'s lockfile,
bundled here by its esbuild), the view in an iframe sandboxed as hosts do under the default CSP,
its tool calls relayed to a real `loomgate-mcp` over stdio. Screenshots go to
test-artifacts/apps/; docs/apps.png is made here (tests/support/pictures.py says where it goes)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from playwright.async_api import FrameLocator, Page, Route, expect

from loomgate.translator.mcp_server.settings import Settings
from tests.support.apps_hosts import apps_extension
from tests.support.browser import browser
from tests.support.cells import PNG_8X8
from tests.support.gates import Gate
from tests.support.mcp_clients import stop_conversation_kernel, text
from tests.support.pictures import blank, keep
from tests.support.png import decode
from tests.support.translators import stdio_for

HOST_DIR = Path(__file__).parent / "apps_host"
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "apps"
HOST_URL = "http://host.test/"
VIEW = "ui://loomgate/execution"
SEEN = 15_000  # ms: how long the view may take to show what the kernel did
HOST_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>test host</title></head>
<body style="margin:0"><script src="/host.js"></script></body></html>"""


@pytest.fixture(scope="module")
def host_script(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Return the host page's script: host.js and the app-bridge, bundled (no network)."""
    esbuild = HOST_DIR / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():
        raise RuntimeError(f"run `npm ci` in {HOST_DIR} first (.ci/run does)")
    out = tmp_path_factory.mktemp("apps-host") / "host.js"
    command = [str(esbuild), "host.js", "--bundle", "--format=iife", f"--outfile={out}"]
    subprocess.run(command, cwd=HOST_DIR, check=True, capture_output=True)
    return out.read_text(encoding="utf-8")


@dataclass
class Host:
    """A host page showing the view of one tool result, and the MCP client behind it."""

    page: Page
    app: FrameLocator
    mcp: Client
    relayed: list[str]

    async def shot(self, name: str) -> None:
        """Keep a screenshot of the page as a test artifact."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        await self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


@contextlib.asynccontextmanager
async def hosted(
    settings: Settings, host_script: str, code: str, *, wait_seconds: float, theme: str = "light"
) -> AsyncIterator[Host]:
    """A real `loomgate-mcp` with an Apps client; run_cell(`code`) and its view in a host page.
    The conversation kernel is stopped afterwards."""
    async with Client(stdio_for(settings), mode="legacy", extensions=[apps_extension()]) as mcp:
        try:
            tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
            assert tools["run_cell"].meta == {"ui": {"resourceUri": VIEW}}
            [content] = (await mcp.read_resource(VIEW)).contents
            arguments = {"code": code, "wait_seconds": wait_seconds}
            result = await mcp.call_tool("run_cell", arguments)
            relayed: list[str] = []

            async def relay(raw: str) -> str:
                """Relay the view's tools/call to the translator, as a host does."""
                params = json.loads(raw)
                tool = tools[params["name"]]
                visibility = ((tool.meta or {}).get("ui") or {}).get("visibility", ["app"])
                assert "app" in visibility, params["name"]
                relayed.append(params["name"])
                answer = await mcp.call_tool(params["name"], params.get("arguments") or {})
                return json.dumps(answer.model_dump(by_alias=True, exclude_none=True, mode="json"))

            async with browser() as chromium:
                page = await chromium.new_page(viewport={"width": 1000, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda error: errors.append(str(error)))

                async def serve(route: Route) -> None:
                    if route.request.url.endswith("/host.js"):
                        await route.fulfill(body=host_script, content_type="text/javascript")
                    else:
                        await route.fulfill(body=HOST_PAGE, content_type="text/html")

                await page.route(HOST_URL + "**", serve)
                await page.expose_function("relayToolCall", relay)
                await page.goto(HOST_URL)
                dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
                start = {
                    "html": content.text,
                    "toolName": "run_cell",
                    "toolInput": arguments,
                    "toolResult": dumped,
                    "theme": theme,
                }
                await page.evaluate("(start) => window.startHost(start)", start)
                yield Host(page, page.frame_locator("#app"), mcp, relayed)
                assert errors == [], errors
        finally:
            await stop_conversation_kernel(mcp)


def shown_lines(app: FrameLocator) -> Any:
    """Return the locator of the lines the view's card shows."""
    return app.locator("#card .output .l")


async def test_a_printing_cell_shows_its_lines_as_they_come(
    settings: Settings, host_script: str, gate: Gate
) -> None:
    # A line every 100 ms until the test opens the gate: "still running" is a fact, not a race.
    opened = f"__import__('os').path.exists({str(gate.path)!r})"
    code = f"import time\ni = 0\nwhile not {opened}:\n    print('line', i, flush=True)\n"
    code += "    i += 1\n    time.sleep(0.1)\nprint('done')"
    began = time.time()
    async with hosted(settings, host_script, code, wait_seconds=0.2, theme="dark") as host:
        card = host.app.locator("#x-1")
        await expect(card.locator("pre.code")).to_have_text(code, timeout=SEEN)
        await expect(card.locator(".prompt")).to_have_text("In [1]")
        started = await card.locator(".started").inner_text()  # the local time it started
        assert re.fullmatch(r"\d\d:\d\d:\d\d", started), started
        hours, minutes, seconds = (int(part) for part in started.split(":"))
        local = time.localtime(began)
        late = hours * 3600 + minutes * 60 + seconds - (local.tm_hour * 3600 + local.tm_min * 60)
        assert 0 <= (late - local.tm_sec) % 86400 <= 60, (started, local)
        for line in ("line 3", "line 12", "line 70"):  # they keep coming while it runs
            await expect(
                shown_lines(host.app).filter(has_text=re.compile(f"^\\d+{line}$"))
            ).to_have_count(1, timeout=SEEN)
            assert await card.locator(".badge").inner_text() == "running"
        await expect(host.app.locator("#interrupt")).to_be_visible()
        await host.shot("printing-running")
        gate.open()
        await expect(card.locator(".badge")).to_have_text("completed", timeout=SEEN)
        await expect(shown_lines(host.app).last).to_contain_text("done")
        await expect(card.locator(".omitted")).to_contain_text("lines not shown")
        assert await shown_lines(host.app).count() == 60  # head and tail of a long output
        assert re.fullmatch(r"\d+(\.\d)? s", await card.locator(".elapsed").inner_text())
        background = await host.app.locator("body").evaluate(
            "(body) => getComputedStyle(body).backgroundColor"
        )
        assert background == "rgb(13, 17, 23)"  # the host said dark
        await host.shot("printing-completed")
        await host.app.locator("#show-all").click()
        total = await card.locator(".output").get_attribute("data-total")
        await expect(host.app.locator("#pager-range")).to_have_text(f"lines 1–{total} of {total}")
        await expect(host.app.locator("#pager-lines .l").first).to_have_text("1line 0")
        assert "view_execution" in host.relayed and "view_output" in host.relayed


async def test_the_picture_in_docs(settings: Settings, host_script: str, tmp_path: Path) -> None:
    # A cell that prints for five minutes: running while the picture is taken, stopped after.
    code = "import time\nfor step in range(1, 3001):\n"
    code += '    print(f"step {step:4d}  loss {1 / step:.4f}", flush=True)\n    time.sleep(0.1)'
    async with hosted(settings, host_script, code, wait_seconds=0.2) as host:
        card = host.app.locator("#x-1")
        step = shown_lines(host.app).filter(has_text=re.compile(r"^\d+step   24 "))
        await expect(step).to_have_count(1, timeout=SEEN)
        await expect(card.locator(".badge")).to_have_text("running")
        await expect(host.app.locator("#status")).to_have_text("following live")
        controls = await host.app.locator("#controls").bounding_box()
        assert controls is not None
        bottom = controls["y"] + controls["height"] + 8
        shot = await host.page.screenshot(clip={"x": 0, "y": 0, "width": 1000, "height": bottom})
    keep("apps.png", shot, tmp_path)
    taken = decode(shot)
    assert blank(taken) is None, blank(taken)
    assert taken.width == 1000


async def test_an_image_and_a_table_render_and_hostile_output_stays_text(
    settings: Settings, host_script: str
) -> None:
    code = (
        "from IPython.display import display, HTML, Image\nimport base64\n"
        "print('<script>document.title = \"pwned\"</script></iframe><b>not bold</b>')\n"
        f"display(Image(base64.b64decode('{PNG_8X8}')))\n"
        "display(HTML('<table><thead><tr><th>name</th><th>n</th></tr></thead>'\n"
        "             '<tbody><tr><td>ada</td><td>36</td></tr></tbody></table>'\n"
        "             '<script>document.title = \"pwned\"</script>'\n"
        "             '<img src=x onerror=\"document.title = 1\"></iframe><iframe></iframe>'))\n"
        "print('progress 10%\\rprogress 50%\\rprogress 100%')\n"
    )
    async with hosted(settings, host_script, code, wait_seconds=10) as host:
        card = host.app.locator("#x-1")
        await expect(card.locator(".badge")).to_have_text("completed", timeout=SEEN)
        img = card.locator("img")
        await expect(img).to_have_count(1, timeout=SEEN)
        frame = host.page.frame(url="about:srcdoc")
        assert frame is not None
        handle = await img.element_handle()
        await frame.wait_for_function("(img) => img.complete && img.naturalWidth === 8", arg=handle)
        table = card.locator(".html-output table")
        await expect(table.locator("td")).to_have_text(["ada", "36"], timeout=SEEN)
        await expect(table.locator("th")).to_have_text(["name", "n"])
        first = shown_lines(host.app).first
        await expect(first).to_contain_text('<script>document.title = "pwned"</script></iframe>')
        # Line 3 to 5: the table as its words, and that its markup was left out.
        await expect(shown_lines(host.app).last).to_have_text("6progress 100%")
        found = await frame.evaluate(
            "() => [document.querySelectorAll('script').length,"
            " document.querySelectorAll('iframe, b, img[src=x]').length, document.title]"
        )
        assert found == [1, 0, "loomgate execution"]  # only the view's own script ran
        assert await host.page.title() == "test host"
        await host.shot("image-and-table")
        assert host.relayed.count("view_execution") == 1  # an ended cell is read once
        body = host.app.locator("body")
        colour = "(body) => getComputedStyle(body).backgroundColor"
        assert await body.evaluate(colour) == "rgb(255, 255, 255)"
        await host.page.evaluate("window.setTheme('dark')")  # the host's theme changes
        await expect(body).to_have_css("background-color", "rgb(13, 17, 23)")


async def test_the_interrupt_button_stops_a_sleeping_cell(
    settings: Settings, host_script: str
) -> None:
    code = "import time\nprint('sleeping', flush=True)\ntime.sleep(60)"
    async with hosted(settings, host_script, code, wait_seconds=0.5) as host:
        card = host.app.locator("#x-1")
        await expect(card.locator(".badge")).to_have_text("running", timeout=SEEN)
        await host.app.locator("#interrupt").click()
        await expect(card.locator(".badge")).to_have_text("interrupted", timeout=SEEN)
        await expect(card.locator('pre[data-kind="error"]')).to_contain_text(
            "KeyboardInterrupt", timeout=SEEN
        )
        await expect(host.app.locator("#interrupt")).to_be_hidden()
        await host.shot("interrupted")
        assert "view_interrupt" in host.relayed
        after = await host.mcp.call_tool("status", {"execution": 1})
        assert after.structured_content["state"] == "interrupted"


async def test_input_answered_in_the_view_reaches_the_kernel(
    settings: Settings, host_script: str
) -> None:
    code = "import getpass\nname = input('who? ')\nsecret = getpass.getpass('pin: ')\n"
    code += "print('hello', name, len(secret))"
    async with hosted(settings, host_script, code, wait_seconds=2) as host:
        card = host.app.locator("#x-1")
        field = host.app.locator("#answer-value")
        await expect(host.app.locator("#answer-prompt")).to_have_text("who? ", timeout=SEEN)
        assert await field.get_attribute("type") == "text"
        await field.fill("ada")
        await host.app.locator("#answer button").click()
        await expect(host.app.locator("#answer-prompt")).to_have_text("pin: ", timeout=SEEN)
        await expect(field).to_have_attribute("type", "password")
        await host.shot("password-asked")
        await field.fill("s3cret-pin")
        await host.app.locator("#answer button").click()
        await expect(card.locator(".badge")).to_have_text("completed", timeout=SEEN)
        await expect(shown_lines(host.app).last).to_contain_text("hello ada 10")
        reached = await host.mcp.call_tool("run_cell", {"code": "name, len(secret)"})
        assert text(reached).endswith("Out[2]: ('ada', 10)")
        assert host.relayed.count("view_send_input") == 2
