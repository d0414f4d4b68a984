"""Translator benchmark: run_cell("1+1") over stdio vs a raw jupyter_client loop, and spawn time.

Run: `uv run python -m bench.translator_bench [--iterations 500] [--out FILE.md]`

Both sides run in one process, interleaved in blocks, against one gateway started here:
- raw: AsyncKernelClient straight to a kernel's ZMQ sockets,
- loomgate: the MCP SDK's client → `loomgate-mcp` over stdio → gateway → kernel,
then the wall time from spawning `loomgate-mcp` to the first run_cell result, attaching to an
existing kernel (`--kernel`) and creating a fresh conversation kernel.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from mcp import Client, StdioServerParameters

from bench.gateway_bench import interleave, publish, raw_kernel, raw_run, timed
from tests.support.gateways import GatewayProcess
from tests.support.translators import stdio

API = "/api/loomgate/kernels"
# Iterations of one path in a row. Each path needs about five calls to get warm again after
# the others ran (its processes' caches, the CPUs' idle states); blocks of 50 keep the median
# a measure of the loop, and the first call of each block is reported as the cold figure.
BLOCK = 50
# Then calls at an agent's pace: every process in the chain has gone idle before each call.
PACE = 0.2
PACED_ROUNDS = 60
NOOP = StdioServerParameters(
    command=sys.executable, args=[str(Path(__file__).with_name("noop_mcp_server.py"))]
)


def translator(gw: GatewayProcess, config: Path, *args: str) -> StdioServerParameters:
    """Return how to spawn `loomgate-mcp` over stdio for `gw`, with an empty config dir."""
    return stdio(gw, *args, env={"XDG_CONFIG_HOME": str(config)})


async def latency(gw: GatewayProcess, config: Path, iterations: int) -> list[str]:
    """Return table rows comparing run_cell("1+1") with the raw loop."""
    async with (
        raw_kernel() as raw,
        Client(translator(gw, config, "--kernel", "bench-latency")) as mcp,
        Client(NOOP) as noop,
    ):

        async def run_cell() -> None:
            result = await mcp.call_tool("run_cell", {"code": "1+1"})
            assert not result.is_error and result.structured_content["state"] == "completed"

        async def noop_call() -> None:
            await noop.call_tool("run_cell", {"code": "1+1"})

        runs = {"raw": lambda: raw_run(raw, "1+1"), "mcp": run_cell, "noop": noop_call}
        samples = await interleave(runs, iterations, BLOCK)
        paced = await apart(runs, PACED_ROUNDS)
    raw, mcp, noop = (statistics.median(samples[name]) for name in ("raw", "mcp", "noop"))
    raw_paced, mcp_paced, noop_paced = (
        statistics.median(paced[name]) for name in ("raw", "mcp", "noop")
    )
    return [
        f"| floor: a no-op MCP tool over stdio, no kernel (the SDK's own cost) | "
        f"{noop:.2f} | | {noop_paced:.2f} | |",
        f"| raw jupyter_client loop | {raw:.2f} | 1.00× | {raw_paced:.2f} | 1.00× |",
        f"| run_cell over stdio: MCP client → loomgate-mcp → gateway | {mcp:.2f} | "
        f"{mcp / raw:.2f}× | {mcp_paced:.2f} | {mcp_paced / raw_paced:.2f}× |",
    ]


async def apart(
    runs: dict[str, Callable[[], Awaitable[object]]], rounds: int
) -> dict[str, list[float]]:
    """Return each run's latencies (ms) with PACE seconds of idleness before every call."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            await asyncio.sleep(PACE)
            samples[name].append(await timed(fn))
    return samples


async def spawn_to_first_result(gw: GatewayProcess, config: Path, *args: str) -> float:
    """Return seconds from spawning loomgate-mcp to its first run_cell result."""
    start = time.perf_counter()
    async with Client(translator(gw, config, *args)) as mcp:
        result = await mcp.call_tool("run_cell", {"code": "1+1"})
        elapsed = time.perf_counter() - start
        assert not result.is_error, result
        if not args:
            await mcp.call_tool("stop_kernel", {"kernel": result.structured_content["kernel"]})
    return elapsed


async def noop_spawn() -> float:
    """Return seconds from spawning the no-op MCP server to its first tool result."""
    start = time.perf_counter()
    async with Client(NOOP) as noop:
        await noop.call_tool("run_cell", {"code": "1+1"})
        return time.perf_counter() - start


async def spawn(gw: GatewayProcess, config: Path) -> list[str]:
    """Return table rows for spawn → first result, attached and with a fresh kernel."""
    floor = [await noop_spawn() for _ in range(5)]
    attached = [
        await spawn_to_first_result(gw, config, "--kernel", "bench-latency") for _ in range(5)
    ]
    fresh = [await spawn_to_first_result(gw, config) for _ in range(3)]
    return [
        f"| floor: spawn → first result of a no-op MCP server (median of 5) | "
        f"{statistics.median(floor):.2f} s |",
        f"| spawn → first run_cell result, attaching to a running kernel (median of 5) | "
        f"{statistics.median(attached):.2f} s |",
        f"| spawn → first run_cell result, new conversation kernel (median of 3) | "
        f"{statistics.median(fresh):.2f} s |",
    ]


async def main() -> None:
    """Run the benchmark; print (and optionally write) a Markdown report."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config"
        config.mkdir()
        gw = GatewayProcess(Path(tmp) / "state")
        gw.extra_args = ["--log-level", "WARNING"]
        gw.start()
        try:
            headers = {"Authorization": f"token {gw.token}"}
            async with httpx.AsyncClient(base_url=gw.url, headers=headers) as http:
                await http.post(API, json={"name": "bench-latency"})
                rows = await latency(gw, config, args.iterations)
                spawn_rows = await spawn(gw, config)
                await http.delete(f"{API}/bench-latency")
        finally:
            gw.stop()
    publish(
        [
            f'## run_cell("1+1"), {args.iterations} iterations per side, interleaved in blocks '
            f"of {BLOCK} (ms)",
            "",
            f"| path | loop median | vs raw | {PACE} s apart (median of {PACED_ROUNDS}) | vs raw |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "## Start-up",
            "",
            "| measure | value |",
            "|---|---|",
            *spawn_rows,
        ],
        args.out,
    )


if __name__ == "__main__":
    asyncio.run(main())
