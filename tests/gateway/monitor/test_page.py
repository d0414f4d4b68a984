"""The monitor page in a real headless Chromium: live cells, tool calls, images, colours, huge
outputs, a gateway restart, and docs/monitor.png made (tests/support/pictures.py)."""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from mcp import Client
from playwright.async_api import Locator, Page, Route, expect

from tests.support.browser import page_at
from tests.support.cells import PNG_8X8, run
from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess
from tests.support.mcp_clients import stop_conversation_kernel, text
from tests.support.pictures import DOCS, blank, keep
from tests.support.png import decode
from tests.support.translators import stdio

API = "/api/loomgate"
SEEN = 20_000  # ms the page may take to show something: generous, to fail rather than hang
SCREENSHOT = DOCS / "monitor.png"


def monitor_url(gateway: GatewayProcess, kernel: str | None = None) -> str:
    """Return the page's address with the monitor token (showing `kernel`)."""
    return f"{gateway.url}/loomgate/monitor?token={gateway.monitor_token}" + (
        f"#{kernel}" if kernel else ""
    )


def card(page: Page, number: int) -> Locator:
    """Return the locator of execution `number`'s card."""
    return page.locator(f"#x-{number}")


@pytest.fixture
async def named(http: httpx.AsyncClient) -> AsyncIterator[str]:
    """A named kernel on the shared gateway (stopped afterwards); yields its id."""
    r = await http.post(f"{API}/kernels", json={"name": f"monitor-{os.urandom(3).hex()}"})
    kernel = r.json()["kernel"]["id"]
    try:
        yield kernel
    finally:
        await http.delete(f"{API}/kernels/{kernel}")


@contextlib.asynccontextmanager
async def kernel_on(
    gateway: GatewayProcess, name: str
) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """Start `gateway`; yield a client of it and a new kernel named `name` (stopped after)."""
    gateway.start()
    async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers, timeout=120) as c:
        r = await c.post(f"{API}/kernels", json={"name": name})
        kernel = r.json()["kernel"]["id"]
        try:
            yield c, kernel
        finally:
            await c.delete(f"{API}/kernels/{kernel}")


async def test_a_conversation_is_followed_live(gateway: GatewayProcess, gate: Gate) -> None:
    async with Client(stdio(gateway)) as mcp:
        try:
            first = await mcp.call_tool("run_cell", {"code": "x = 6\nx * 7"})
            assert "Out[1]: 42" in text(first)
            listing = (await mcp.call_tool("list_kernels", {})).structured_content or {}
            kernel = listing["current"]
            async with page_at(monitor_url(gateway, kernel)) as page:
                one = page.locator("#x-1")
                await expect(one.locator("pre.code")).to_have_text("x = 6\nx * 7", timeout=SEEN)
                await expect(one.locator(".out")).to_have_text("Out[1]: ", timeout=SEEN)
                await expect(one.locator(".l")).to_have_text(["1Out[1]: 42"])
                await expect(one).to_contain_text("conversation ")
                # The tool call, with its result summary, in the conversation's list.
                call = page.locator('#tool-calls li[data-tool="run_cell"]').first
                await expect(call).to_contain_text("In [1]", timeout=SEEN)
                await expect(call).to_contain_text("Out[1]: 42")
                await expect(call.locator(".args")).to_have_text("code=x = 6\nx * 7")
                # A running cell's output grows on the page while it prints.
                code = f"print('first', flush=True)\n{gate.wait}\nprint('second')"
                running = await mcp.call_tool("run_cell", {"code": code, "wait_seconds": 0.5})
                assert "In [2] is still running" in text(running)
                two = page.locator("#x-2")
                await expect(two).to_have_attribute("data-state", "running", timeout=SEEN)
                await expect(two.locator(".l")).to_have_text(["1first"], timeout=SEEN)
                gate.open()
                await expect(two).to_have_attribute("data-state", "completed", timeout=SEEN)
                await expect(two.locator(".l")).to_have_text(["1first", "2second"])
                kernels = page.locator(f'#kernels li[data-kernel="{kernel}"]')
                await expect(kernels).to_contain_text("held by conversation ")
        finally:
            await stop_conversation_kernel(mcp)


async def test_a_kernel_nobody_holds_says_when_it_stops(
    gateway: GatewayProcess, http: httpx.AsyncClient
) -> None:
    created = await http.post(f"{API}/kernels", json={"lifetime": "conversation"})
    kernel = created.json()["kernel"]["id"]
    try:
        stops_at = (await http.get(f"{API}/kernels/{kernel}")).json()["kernel"]["stops_at"]
        assert stops_at is not None  # never held: its grace runs from its start
        clock = time.strftime("%H:%M:%S", time.localtime(stops_at))
        async with page_at(monitor_url(gateway, kernel)) as page:
            item = page.locator(f'#kernels li[data-kernel="{kernel}"] .meta').nth(1)
            await expect(item).to_have_text(
                re.compile(rf"^no holder · active .* ago · stops at {clock} unless held again$"),
                timeout=SEEN,
            )
    finally:
        await http.delete(f"{API}/kernels/{kernel}")


STRICT = {
    "profile": "strict",
    "writable": ["/home/p/proj"],
    "hidden": ["/home/p/.ssh", "/home/p/.aws"],
    "network": False,
    "memory": 4 << 30,
    "processes": 512,
    "mechanism": "bubblewrap, landlock, cgroup v1",
}


async def test_each_kernels_profile_is_shown(
    gateway: GatewayProcess, http: httpx.AsyncClient, named: str
) -> None:
    other = await http.post(f"{API}/kernels", json={"name": f"plain-{os.urandom(3).hex()}"})
    plain = other.json()["kernel"]["id"]
    try:
        async with page_at(monitor_url(gateway, named)) as page:
            await expect(page.locator(f'#kernels li[data-kernel="{named}"]')).to_be_visible(
                timeout=SEEN
            )

            async def under_strict(route: Route) -> None:
                # The gateway's own list, with one kernel shown under a profile (kernels it
                # starts carry theirs once it confines them).
                response = await route.fetch()
                listing = await response.json()
                for kernel in listing["kernels"]:
                    if kernel["id"] == named:
                        kernel["sandbox"] = STRICT
                    elif kernel["id"] == plain:
                        kernel["sandbox"] = None
                await route.fulfill(response=response, json=listing)

            await page.route(lambda url: urlsplit(url).path == f"{API}/kernels", under_strict)
            await page.check("#show-ended")  # the list is fetched again, through the route
            confined = page.locator(f'#kernels li[data-kernel="{named}"] .sandbox')
            await expect(confined).to_have_text("sandbox: strict (no network)", timeout=SEEN)
            await expect(confined).to_have_attribute(
                "title",
                "writable: /home/p/proj, its own /tmp\nhidden: 2 paths\nnetwork: off\n"
                "memory: 4 GiB\nprocesses: 512\nenforced by bubblewrap, landlock, cgroup v1",
            )
            unconfined = page.locator(f'#kernels li[data-kernel="{plain}"]')
            await expect(unconfined).to_be_visible()
            await expect(unconfined.locator(".sandbox")).to_have_count(0)
    finally:
        await http.delete(f"{API}/kernels/{plain}")


async def test_a_kernels_checkpoints_and_forks_are_shown_as_they_come_and_go(
    gateway: GatewayProcess, http: httpx.AsyncClient, named: str
) -> None:
    async with page_at(monitor_url(gateway, named)) as page:
        item = page.locator(f'#kernels li[data-kernel="{named}"]')
        await expect(item).to_be_visible(timeout=SEEN)
        await expect(item.locator(".checkpoints")).to_have_count(0)
        await run(http, named, "x = 1")
        for name in ("clean", "second"):
            r = await http.post(f"{API}/kernels/{named}/checkpoints", json={"name": name})
            assert r.status_code == 201, r.text
        shown = item.locator(".checkpoints")  # followed on the event stream, not reloaded
        await expect(shown).to_have_text("checkpoints: clean, second", timeout=SEEN)
        await expect(shown).to_have_attribute(
            "title",
            re.compile(
                r"clean: the state after In \[1\], holds [\d.]+ MiB\n"
                r"second: the state after In \[1\], holds [\d.]+ MiB"
            ),
        )
        r = await http.delete(f"{API}/kernels/{named}/checkpoints/clean")
        assert r.status_code == 200, r.text
        await expect(shown).to_have_text("checkpoints: second", timeout=SEEN)
        origin = (await http.get(f"{API}/kernels/{named}")).json()["kernel"]["name"]
        r = await http.post(
            f"{API}/kernels", json={"name": f"{origin}-b", "fork": f"{named}@second"}
        )
        assert r.status_code == 201, r.text
        fork = r.json()["kernel"]["id"]
        try:
            forked = page.locator(f'#kernels li[data-kernel="{fork}"] .fork')
            await expect(forked).to_have_text(
                f"forked from {origin}@second, after In [1]", timeout=SEEN
            )
            await expect(item.locator(".fork")).to_have_count(0)  # the origin is no fork
        finally:
            await http.delete(f"{API}/kernels/{fork}")


async def test_images_and_coloured_tracebacks_render(
    gateway: GatewayProcess, http: httpx.AsyncClient, named: str
) -> None:
    shown = await run(
        http,
        named,
        f"from IPython.display import Image, display\n"
        f"import base64\ndisplay(Image(base64.b64decode('{PNG_8X8}')))",
        wait=30,
    )
    image = shown["number"]
    failing = (await run(http, named, "def f():\n    return 1/0\nf()", wait=30))["number"]
    async with page_at(monitor_url(gateway, named)) as page:
        img = card(page, image).locator("img")
        await expect(img).to_have_count(1, timeout=SEEN)
        await page.wait_for_function(
            "(img) => img.complete && img.naturalWidth === 8", arg=await img.element_handle()
        )
        error = card(page, failing).locator('pre[data-kind="error"]')
        await expect(error).to_contain_text("ZeroDivisionError", timeout=SEEN)
        colours = await error.locator("span[style]").evaluate_all(
            "(spans) => spans.map((s) => getComputedStyle(s).color)"
        )
        assert len(set(colours)) >= 2  # more than one ANSI colour rendered
        assert "\x1b" not in await error.inner_text()


async def test_a_million_lines_page_through(
    gateway: GatewayProcess, http: httpx.AsyncClient, named: str
) -> None:
    number = (await run(http, named, "for i in range(1_000_000): print(i)", wait=300))["number"]
    async with page_at(monitor_url(gateway, named)) as page:
        box = card(page, number).locator(".output")
        await expect(box.locator(".l").first).to_have_text("10", timeout=SEEN)
        await expect(box.locator(".l").last).to_have_text("1000000999999")
        await expect(box.locator(".omitted")).to_contain_text("999940 lines not shown")
        assert await box.locator(".l").count() == 60  # head and tail, never the whole output
        await card(page, number).locator("header a").click()
        pager = page.locator("#pager")
        await expect(page.locator("#pager-range")).to_have_text("lines 1–500 of 1000000")
        await pager.locator('[data-page="next"]').click()
        await expect(page.locator("#pager-range")).to_have_text("lines 501–1000 of 1000000")
        await expect(page.locator("#pager-lines .l").first).to_have_text("501500")
        await pager.locator('[data-page="last"]').click()
        await expect(page.locator("#pager-range")).to_have_text("lines 999501–1000000 of 1000000")
        await expect(page.locator("#pager-lines .l").last).to_have_text("1000000999999")
        assert await page.locator("#pager-lines .l").count() == 500
        # Still responsive: a script runs at once and the search answers.
        assert await page.evaluate("1 + 1") == 2
        await pager.locator('button[value="close"]').click()
        await page.fill("#query", "^99999[0-9]$")
        await page.click("#search button")
        results = page.locator("#search-results")
        await expect(results).to_contain_text("10 matches", timeout=SEEN)


async def test_the_page_reconnects_after_a_restart_and_shows_what_it_missed(
    fresh_gateway: GatewayProcess,
) -> None:
    async with kernel_on(fresh_gateway, "survivor") as (http, kernel):
        before = (await run(http, kernel, "'before'", wait=30))["number"]
        async with page_at(monitor_url(fresh_gateway, kernel)) as page:
            shown = page.locator(f"#x-{before}")
            await expect(shown).to_contain_text("'before'", timeout=SEEN)
            await expect(page.locator("#link")).to_have_attribute("data-state", "live")
            # The page cannot listen again until the cell below has run: it must catch up.
            await page.route("**/api/loomgate/events*", lambda route: route.abort())
            fresh_gateway.kill()
            await expect(page.locator("#link")).to_have_attribute(
                "data-state", "down", timeout=SEEN
            )
            fresh_gateway.start()  # the same tokens; it takes the kernel back
            missed = (await run(http, kernel, "'missed'", wait=30))["number"]
            assert missed == before + 1
            await page.unroute("**/api/loomgate/events*")
            await expect(page.locator(f"#x-{missed}")).to_contain_text("'missed'", timeout=SEEN)
            await expect(page.locator("#link")).to_have_attribute("data-state", "live")


async def test_the_picture_in_docs(confined_gateway: GatewayProcess, tmp_path: Path) -> None:
    # Kernels under two profiles: the shipped default (workspace) and `none`.
    async with kernel_on(confined_gateway, "analysis") as (http, kernel):
        cells = [
            ("data = [n * n for n in range(8)]\nprint(data)", "conversation 3f2a9b"),
            ("def mean(xs):\n    # the average\n    return sum(xs) / len(xs)\nmean(data)", None),
            ("mean([])", "cli"),
        ]
        calls = []
        for code, client in cells:
            r = await http.post(
                f"{API}/kernels/{kernel}/executions",
                json={
                    "code": code,
                    "wait": 30,
                    "head": 1,
                    "client": client or "conversation 3f2a9b",
                },
            )
            execution = r.json()["execution"]
            if client != "cli":
                calls.append(
                    {
                        "conversation": "conversation 3f2a9b",
                        "client": "claude-code",
                        "tool": "run_cell",
                        "arguments": {"code": code},
                        "summary": f"In [{execution['number']}] (3 ms):\n"
                        + execution["output"]["head"][0]["text"],
                        "error": False,
                        "duration": 0.004,
                        "kernel_id": kernel,
                    }
                )
        await http.post(f"{API}/tool-calls", json={"tool_calls": calls})
        r = await http.post(f"{API}/kernels", json={"name": "scratch", "sandbox": "none"})
        scratch = r.json()["kernel"]["id"]
        try:
            await run(http, scratch, "1 + 1")
            async with page_at(monitor_url(confined_gateway, kernel)) as page:
                traceback = card(page, 3).locator('pre[data-kind="error"]')
                await expect(traceback).to_contain_text("ZeroDivisionError", timeout=SEEN)
                await expect(page.locator("#tool-calls li")).to_have_count(2)
                profiles = page.locator("#kernels li .sandbox")
                await expect(profiles).to_have_count(2, timeout=SEEN)
                shown = sorted(await profiles.all_inner_texts())
                assert shown[0] == "sandbox: none" and shown[1].startswith("sandbox: workspace")
                shot = await page.screenshot()
        finally:
            await http.delete(f"{API}/kernels/{scratch}")
    keep("monitor.png", shot, tmp_path)
    kept, taken = decode(SCREENSHOT.read_bytes()), decode(shot)
    assert blank(taken) is None, blank(taken)
    assert (taken.width, taken.height) == (kept.width, kept.height) == (1280, 800)
    # The layout's fixed points: the top bar, the kernels pane, the cards' pane, the tools pane.
    for x, y in [(640, 4), (4, 400), (600, 795), (1275, 400)]:
        assert taken.pixel(x, y) == kept.pixel(x, y), (x, y)
    assert taken.pixel(4, 400) != taken.pixel(600, 795)  # the panes are told apart


async def test_the_page_follows_the_systems_colour_scheme(gateway: GatewayProcess) -> None:
    async with page_at(monitor_url(gateway)) as page:
        backgrounds = {}
        for scheme in ("light", "dark"):
            await page.emulate_media(color_scheme=scheme)
            backgrounds[scheme] = await page.evaluate(
                "getComputedStyle(document.body).backgroundColor"
            )
        assert backgrounds == {"light": "rgb(255, 255, 255)", "dark": "rgb(13, 17, 23)"}


async def test_the_page_opens_on_the_top_kernel_and_shows_tables_as_laid_out(
    fresh_gateway: GatewayProcess,
) -> None:
    fresh_gateway.start()
    async with httpx.AsyncClient(
        base_url=fresh_gateway.url, headers=fresh_gateway.headers, timeout=120
    ) as http:
        first = (await http.post(f"{API}/kernels", json={"name": "first"})).json()["kernel"]
        second = (await http.post(f"{API}/kernels", json={"name": "second"})).json()["kernel"]
        assert (await http.get(f"{API}/kernels")).json()["kernels"][0]["id"] == first["id"]
        await run(http, "second", "1 + 1")  # the most recent activity: the top of the list
        async with Client(stdio(fresh_gateway)) as mcp:
            listing = await mcp.call_tool("list_kernels", {})
            assert not listing.is_error
        async with page_at(monitor_url(fresh_gateway), width=1000) as page:
            top = page.locator("#kernels li").first
            await expect(top).to_have_attribute("data-kernel", second["id"], timeout=SEEN)
            await expect(top).to_have_class("selected")
            await expect(card(page, 1).locator("pre.code")).to_have_text("1 + 1")

            summary = page.locator('#tool-calls li[data-tool="list_kernels"] .summary')
            await expect(summary).to_contain_text("second", timeout=SEEN)
            await expect(summary).to_have_class("summary table")
            style = await summary.evaluate(
                "(e) => { const s = getComputedStyle(e);"
                " return [s.whiteSpace, s.fontFamily, s.overflowX]; }"
            )
            assert style[0] == "pre" and "monospace" in style[1] and style[2] == "auto", style
            # Each row of the table on one line: the box scrolls rather than the rows wrap.
            rows = (await summary.inner_text()).split("\n")
            line_height = await summary.evaluate(
                "(e) => parseFloat(getComputedStyle(e).lineHeight)"
            )
            height = await summary.evaluate("(e) => e.clientHeight")
            assert height <= line_height * len(rows) + 1, (height, line_height, rows)
            widths = await summary.evaluate("(e) => [e.scrollWidth, e.clientWidth]")
            pane = await page.locator("#tools-pane").evaluate("(e) => e.clientWidth")
            assert widths[1] <= pane, (widths, pane)  # the pane keeps its width
        await http.delete(f"{API}/kernels/{first['id']}")
        await http.delete(f"{API}/kernels/{second['id']}")
