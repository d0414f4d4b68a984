"""What the monitor page costs: run_cell latency with the page open and following vs closed, and
loading the page of a kernel with 1,000 executions.

Run: `uv run python -m bench.monitor_bench [--rounds 3] [--out FILE.md]`

The latency runs `run_cell("1+1")` through the MCP SDK's client over stdio (loomgate-mcp, a
gateway started here), in blocks that alternate between the page closed (about:blank) and the
page open on the conversation's kernel, in a real headless Chromium; the raw jupyter_client loop
in the same blocks is the floor. The page load opens the monitor on a kernel with 1,000
executions: first contentful paint, and the time until the newest page of cards is on screen.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from mcp import Client

from bench.gateway_bench import raw_kernel, raw_run, timed
from tests.support.browser import browser
from tests.support.gateways import GatewayProcess
from tests.support.translators import stdio

BLOCK = 50
WARMUP = 5
PACE = 0.2  # seconds between calls in the paced runs, an agent's pace
PACED = 40  # paced calls per mode and round
SHOWN = 5  # cells per round timed from their result to their card on the page
EXECUTIONS = 1000
MODES = ("closed", "follower", "open")
# A follower of the event stream that is not a browser: what the gateway's side costs alone.
FOLLOWER = """
import sys, httpx
headers = {"Authorization": "token " + sys.argv[2]}
with httpx.stream("GET", sys.argv[1], headers=headers, timeout=None) as r:
    print("following", flush=True)
    for _ in r.iter_lines():
        pass
"""


def monitor(gw: GatewayProcess, kernel: str) -> str:
    """Return the monitor page's address for `kernel`."""
    return f"{gw.url}/loomgate/monitor?token={gw.monitor_token}#{kernel}"


async def latency(gw: GatewayProcess, rounds: int) -> dict[str, list[float]]:
    """Return run_cell latencies (ms) with the page closed and open, and the raw loop's."""
    samples: dict[str, list[float]] = {
        name: [] for mode in MODES for name in (mode, f"{mode} paced")
    }
    samples["raw"] = []
    samples["shown"] = []  # ms from a run_cell result to its finished card on the page
    async with (
        raw_kernel() as raw,
        Client(stdio(gw, "--kernel", "bench-monitor")) as mcp,
        browser() as chromium,
    ):
        page = await chromium.new_page(viewport={"width": 1280, "height": 800})

        async def run_cell() -> None:
            result = await mcp.call_tool("run_cell", {"code": "1+1"})
            assert not result.is_error and result.structured_content["state"] == "completed"

        await run_cell()
        listing = (await mcp.call_tool("list_kernels", {})).structured_content or {}
        kernel = listing["current"]
        for _ in range(rounds * 2):
            for mode in MODES:
                follower = None
                if mode == "open":
                    await page.goto(monitor(gw, kernel))
                    await page.wait_for_selector('#link[data-state="live"]')
                else:
                    await page.goto("about:blank")
                if mode == "follower":
                    follower = await asyncio.create_subprocess_exec(
                        sys.executable,
                        "-c",
                        FOLLOWER,
                        f"{gw.url}/api/loomgate/events",
                        gw.monitor_token,
                        stdout=asyncio.subprocess.PIPE,
                    )
                    assert follower.stdout is not None
                    assert await follower.stdout.readline() == b"following\n"
                for _ in range(WARMUP):
                    await run_cell()
                for _ in range(BLOCK):
                    samples[mode].append(await timed(run_cell))
                    samples["raw"].append(await timed(lambda: raw_run(raw, "1+1")))
                for _ in range(PACED):
                    await asyncio.sleep(PACE)
                    samples[f"{mode} paced"].append(await timed(run_cell))
                if follower is not None:
                    follower.terminate()
                    await follower.wait()
                if mode == "open":  # the page did follow: the last cell shows up on it
                    for _ in range(SHOWN):
                        await asyncio.sleep(PACE)
                        count = await mcp.call_tool("run_cell", {"code": "1+1"})
                        answered = time.perf_counter()
                        number = count.structured_content["execution"]
                        # Checked on every frame (a selector wait polls as slowly as every 0.5 s).
                        await page.wait_for_function(
                            f"document.querySelector('#x-{number}[data-state=completed]')",
                            polling="raf",
                        )
                        samples["shown"].append((time.perf_counter() - answered) * 1000)
    return samples


async def page_load(gw: GatewayProcess, loads: int) -> dict[str, list[float]]:
    """Return first paint and complete times (ms) of the page of a 1,000-execution kernel."""
    headers = {"Authorization": f"token {gw.token}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=120) as http:
        r = await http.post("/api/loomgate/kernels", json={"name": "bench-thousand"})
        kernel = r.json()["kernel"]["id"]
        for n in range(EXECUTIONS):
            await http.post(
                f"/api/loomgate/kernels/{kernel}/executions",
                json={"code": f"print('line of cell {n}')\n{n}", "wait": 30},
            )
        times: dict[str, list[float]] = {"paint": [], "complete": []}
        async with browser() as chromium:
            for _ in range(loads):
                page = await chromium.new_page(viewport={"width": 1280, "height": 800})
                await page.goto(monitor(gw, kernel))
                await page.wait_for_function(
                    f"document.querySelector('#x-{EXECUTIONS - 29}')", polling="raf"
                )
                complete = await page.evaluate("performance.now()")
                paint = await page.evaluate(
                    "performance.getEntriesByName('first-contentful-paint')[0].startTime"
                )
                times["paint"].append(paint)
                times["complete"].append(complete)
                await page.close()
        await http.delete(f"/api/loomgate/kernels/{kernel}")
    return times


def spread(values: list[float]) -> str:
    """Return the median and range of `values`."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


async def main() -> None:
    """Measure and print (and write) the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        gw = GatewayProcess(Path(work) / "state")
        gw.state_dir.mkdir()
        gw.start()
        try:
            started = time.perf_counter()
            samples = await latency(gw, args.rounds)
            loads = await page_load(gw, 5)
        finally:
            gw.stop()

    def versus(mode: str) -> str:
        loop = statistics.median(samples[mode]) / statistics.median(samples["closed"])
        paced = statistics.median(samples[f"{mode} paced"]) / statistics.median(
            samples["closed paced"]
        )
        return f"**{loop:.3f}×** in a loop, **{paced:.3f}×** 0.2 s apart"

    lines = [
        f"## The monitor's cost ({time.perf_counter() - started:.0f} s)",
        "",
        f'run_cell("1+1") over stdio, {len(samples["open"])} calls per mode in blocks of '
        f"{BLOCK}, alternating (ms; median and range of the calls):",
        "",
        "| mode | run_cell in a loop | 0.2 s apart | raw jupyter_client loop, same blocks |",
        "|---|---|---|---|",
        f"| page closed | {spread(samples['closed'])} | {spread(samples['closed paced'])} | "
        f"{spread(samples['raw'])} |",
        f"| a follower of the event stream, no browser | {spread(samples['follower'])} | "
        f"{spread(samples['follower paced'])} |  |",
        f"| page open in Chromium, following the kernel | {spread(samples['open'])} | "
        f"{spread(samples['open paced'])} |  |",
        "",
        f"follower / closed: {versus('follower')}; page open / closed: {versus('open')}",
        "",
        f"From a run_cell result to its finished card on the open page: {spread(samples['shown'])}"
        f" ms ({len(samples['shown'])} cells, 0.2 s apart).",
        "",
        f"Page of a kernel with {EXECUTIONS} executions, {len(loads['paint'])} loads (ms):",
        "",
        "| measure | value |",
        "|---|---|",
        f"| first contentful paint | {spread(loads['paint'])} |",
        f"| the newest 30 cards on screen | {spread(loads['complete'])} |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    asyncio.run(main())
