"""The first tool call after idle time: `run_cell` and `list_kernels` through a real
`loomgate-mcp` over stdio, in a loop (the warm floor) and after idle spans, on a quiet machine
and with processes spinning on the CPU. For each call: the kernel's own share (the cell's
elapsed time), and what the gateway logged at debug level (HTTP requests and rpc upgrades; calls
over an open rpc are not logged), so that a slow call says whether a connection was opened again.

    uv run python -m bench.idle_call_bench [--idles 30 120] [--spinning 0 1 6] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
from mcp import Client

from bench.gateway_bench import publish
from tests.support.gateways import GatewayProcess
from tests.support.translators import stdio

API = "/api/loomgate/kernels"
KERNEL = "idle-bench"
WARM_CALLS = 30
RPC_UPGRADE = "/api/loomgate/rpc"
TOOLS = ("run_cell", "list_kernels")  # run_cell is a hot call (the rpc), list_kernels is not


@contextlib.contextmanager
def spinning(count: int) -> Iterator[None]:
    """Keep `count` processes spinning on the CPU while inside."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


class GatewayLog:
    """The gateway's log, read from where the last call left it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size

    def since_last(self) -> tuple[int, int]:
        """Return the HTTP requests and rpc upgrades the gateway logged since the last read."""
        with self.path.open("rb") as f:
            f.seek(self.offset)
            new = f.read().decode(errors="replace").splitlines()
            self.offset = f.tell()
        requests = [line for line in new if " GET " in line or " POST " in line]
        upgrades = sum(RPC_UPGRADE in line for line in requests)
        return len(requests) - upgrades, upgrades


async def timed_call(client: Client, tool: str) -> tuple[float, float]:
    """Return the ms one call of `tool` took and the ms of it the kernel ran the cell (0 for
    `list_kernels`), checking its answer: `list_kernels` lists the bench's kernel,
    `run_cell("1+1")` completes."""
    began = time.perf_counter()
    if tool == "run_cell":
        result = await client.call_tool("run_cell", {"code": "1+1"})
    else:
        result = await client.call_tool("list_kernels", {})
    took = (time.perf_counter() - began) * 1000
    assert not result.is_error, result
    data = result.structured_content or {}
    if tool == "run_cell":
        assert data.get("state") == "completed", data
        return took, float(data["elapsed_seconds"]) * 1000
    assert KERNEL in [k.get("name") for k in data.get("kernels", [])], data
    return took, 0.0


def crossed(requests: int, upgrades: int) -> str:
    """Return what reached the gateway, in words."""
    return f"{requests} HTTP, {upgrades} rpc upgrade{'s' * (upgrades != 1)}"


@contextlib.asynccontextmanager
async def translator(gw: GatewayProcess, config: Path) -> AsyncIterator[Client]:
    """A `loomgate-mcp` of `gw` whose conversation uses the bench's kernel."""
    params = stdio(gw, "--kernel", KERNEL, env={"XDG_CONFIG_HOME": str(config)})
    async with Client(params) as client:
        yield client


def in_kernel(ms: float) -> str:
    """Return the kernel's share of a call, in words ("–" for a call that runs no cell)."""
    return f"{ms:.1f}" if ms else "–"


async def condition(
    gw: GatewayProcess, config: Path, log: GatewayLog, idles: list[float], spinners: int
) -> list[str]:
    """Return the report's rows for one condition: `spinners` processes keep the CPU busy."""
    rows = []
    with spinning(spinners):
        async with translator(gw, config) as client:
            label = f"{spinners} spinning" if spinners else "quiet"
            floors = {}
            for tool in TOOLS:
                warm = [await timed_call(client, tool) for _ in range(WARM_CALLS)]
                requests, upgrades = log.since_last()
                totals = [took for took, _ in warm[5:]]
                floors[tool] = statistics.median(totals)
                kernel = statistics.median(ran for _, ran in warm[5:])
                rows.append(
                    f"| {label} | {tool}, warm loop ({WARM_CALLS} calls) | {floors[tool]:.1f} "
                    f"({min(totals):.1f}–{max(totals):.1f}) | {in_kernel(kernel)} | 1.00× "
                    f"| {crossed(requests, upgrades)} in all |"
                )
            for idle in idles:
                for tool in TOOLS:
                    await asyncio.sleep(idle)
                    took, ran = await timed_call(client, tool)
                    requests, upgrades = log.since_last()
                    rows.append(
                        f"| {label} | {tool} after {idle:g} s idle | {took:.1f} "
                        f"| {in_kernel(ran)} | {took / floors[tool]:.2f}× "
                        f"| {crossed(requests, upgrades)} |"
                    )
    return rows


async def main() -> None:
    """Run the benchmark; print (and optionally write) a Markdown report."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--idles", type=float, nargs="+", default=[30.0, 120.0])
    parser.add_argument(
        "--spinning", type=int, nargs="+", default=[0, 1], help="busy processes, per condition"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = work / "config"
        config.mkdir()
        gw = GatewayProcess(work / "state")
        (work / "state").mkdir()
        gw.start()
        try:
            async with httpx.AsyncClient(base_url=gw.url, headers=gw.headers) as http:
                r = await http.post(API, json={"name": KERNEL})
                assert r.status_code in (200, 201), r.text
                log = GatewayLog(work / "state.stderr")
                rows = []
                for spinners in args.spinning:
                    rows += await condition(gw, config, log, args.idles, spinners)
                await http.delete(f"{API}/{KERNEL}")
        finally:
            gw.stop()
    publish(
        [
            "## The first call after idle time (loomgate-mcp over stdio, ms)",
            "",
            "| machine | call | ms | of it, the cell in the kernel | vs warm median "
            "| HTTP requests and rpc upgrades the gateway logged |",
            "|---|---|---|---|---|---|",
            *rows,
        ],
        args.out,
    )


if __name__ == "__main__":
    asyncio.run(main())
