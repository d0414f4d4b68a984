"""MCP Apps benchmark: run_cell("1+1") over stdio from a client that negotiated the Apps
extension beside one that did not (issue 31: ≤ 1.01×), interleaved in blocks, and the view's
first paint after a result in a headless Chromium host page (goal ≤ 100 ms).

Run: `uv run python -m bench.apps_bench [--iterations 500] [--out FILE.md]`
(the first paint needs `npm ci --prefix tests/translator/mcp_server/apps_host`; without it that
table is left out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from mcp import Client
from playwright.async_api import Route

from bench.gateway_bench import interleave, publish
from tests.support.apps_hosts import apps_extension
from tests.support.browser import browser
from tests.support.gateways import GatewayProcess
from tests.support.translators import stdio

BLOCK = 50
VIEW = "ui://loomgate/execution"
HOST_DIR = Path(__file__).resolve().parent.parent / "tests/translator/mcp_server/apps_host"
PAINTS = 20


async def latency(gw: GatewayProcess, iterations: int) -> dict[str, list[float]]:
    """Return run_cell latencies (ms) of a client without Apps and of one with it."""
    async with (
        Client(stdio(gw, "--kernel", "bench-apps-plain")) as plain,
        Client(stdio(gw, "--kernel", "bench-apps-view"), extensions=[apps_extension()]) as host,
    ):

        async def without() -> None:
            result = await plain.call_tool("run_cell", {"code": "1+1"})
            assert not result.is_error and "loomgate/execution" not in (result.meta or {})

        async def with_apps() -> None:
            result = await host.call_tool("run_cell", {"code": "1+1"})
            assert not result.is_error and "loomgate/execution" in (result.meta or {})

        return await interleave({"without": without, "with": with_apps}, iterations, BLOCK)


def bundle(work: Path) -> str | None:
    """Return the test host page's script (app-bridge bundled), or None without `npm ci`."""
    esbuild = HOST_DIR / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():
        return None
    out = work / "host.js"
    subprocess.run(
        [str(esbuild), "host.js", "--bundle", "--format=iife", f"--outfile={out}"],
        cwd=HOST_DIR,
        check=True,
        capture_output=True,
    )
    return out.read_text(encoding="utf-8")


async def first_paints(gw: GatewayProcess, script: str) -> list[float]:
    """Return the ms from handing the view a result to its card being drawn, PAINTS times."""
    page_html = '<!doctype html><body><script src="/host.js"></script></body>'
    paints = []
    async with (
        Client(stdio(gw, "--kernel", "bench-apps-paint"), extensions=[apps_extension()]) as mcp,
        browser() as chromium,
    ):
        [content] = (await mcp.read_resource(VIEW)).contents
        result = await mcp.call_tool("run_cell", {"code": "print('painted')"})
        dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")

        async def relay(raw: str) -> str:
            params = json.loads(raw)
            answer = await mcp.call_tool(params["name"], params.get("arguments") or {})
            return json.dumps(answer.model_dump(by_alias=True, exclude_none=True, mode="json"))

        async def serve(route: Route) -> None:
            if route.request.url.endswith(".js"):
                await route.fulfill(body=script, content_type="text/javascript")
            else:
                await route.fulfill(body=page_html, content_type="text/html")

        for _ in range(PAINTS):
            page = await chromium.new_page()
            await page.route("http://host.test/**", serve)
            await page.expose_function("relayToolCall", relay)
            await page.goto("http://host.test/")
            start = {"html": content.text, "toolName": "run_cell", "toolInput": {}}
            await page.evaluate(
                "(start) => window.startHost({...start, toolResult: start.result, theme: 'light'})",
                {**start, "result": dumped},
            )
            begun = time.perf_counter()
            await page.frame_locator("#app").locator("#x-1 .output .l").first.wait_for()
            paints.append((time.perf_counter() - begun) * 1000)
            await page.close()
    return paints


async def main() -> None:
    """Measure and print (and write) the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        gw = GatewayProcess(Path(work) / "state")
        gw.state_dir.mkdir()
        gw.start()
        try:
            samples = await latency(gw, args.iterations)
            script = bundle(Path(work))
            paints = await first_paints(gw, script) if script else None
        finally:
            gw.stop()
    plain, viewed = (statistics.median(samples[name]) for name in ("without", "with"))
    lines = [
        "# MCP Apps: run_cell with the extension negotiated and without",
        "",
        f'run_cell("1+1") over stdio, {args.iterations} calls each, interleaved in blocks '
        f"of {BLOCK} (median ms).",
        "",
        "| client | median ms | vs without |",
        "|---|---|---|",
        f"| without Apps | {plain:.2f} | 1.00× |",
        f"| with Apps (result names the view's execution) | {viewed:.2f} | {viewed / plain:.3f}× |",
    ]
    if paints is not None:
        lines += [
            "",
            f"The view's first paint: from sending the tool result to the card's first output "
            f"line, {PAINTS} fresh host pages (median {statistics.median(paints):.1f} ms, "
            f"max {max(paints):.1f} ms; goal ≤ 100 ms).",
        ]
    publish(lines, args.out)


if __name__ == "__main__":
    asyncio.run(main())
