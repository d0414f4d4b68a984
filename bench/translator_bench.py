"""Translator benchmark: run_cell("1+1") over stdio hop by hop, loommux beside it, spawn time.

Run: `uv run python -m bench.translator_bench [--iterations 500] [--out FILE.md] [--profile]`

Every path runs in one process, interleaved in blocks, against one gateway started here:
- raw: AsyncKernelClient straight to a kernel's ZMQ sockets (the kernel's own floor),
- http: the gateway's submit through the translator's own client (over the channel, as it sends it),
- noop: the MCP SDK's client → a no-op MCP server over stdio (the SDK's own floor),
- loomgate: the MCP SDK's client → `loomgate-mcp` over stdio → gateway → kernel,
- loommux 0.1.8 (installed here by uv into a temporary venv): the same client → its run_python;
the differences give each hop's share (the budget table), then the wall time from spawning
`loomgate-mcp` to the first run_cell result, attached to a kernel and with a fresh one.
`--profile` instead runs the translator under cProfile for a loop of calls and prints where its
own time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path

import httpx
from mcp import Client, StdioServerParameters

from bench.gateway_bench import interleave, publish, raw_kernel, raw_run, timed
from bench.installed import as_installed
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.output_view import OutputLimits
from tests.support.gateways import GatewayProcess, free_port
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
LOOMMUX = "loommux==0.1.8"
ECHO_SERVER = Path(__file__).with_name("echo_http_server.py")
PATHS = {
    "noop": "floor: a no-op MCP tool over stdio, no kernel (the SDK's own cost)",
    "relay": "floor: the no-op tool making one HTTP request to a tornado echo server (a second "
    "process behind the MCP server, as the gateway is)",
    "raw": "raw jupyter_client loop",
    "http": "the gateway's submit through the translator's own client (over the channel)",
    "mcp": "run_cell over stdio: MCP client → loomgate-mcp → gateway",
    "loommux": f"{LOOMMUX} run_python over stdio, the same client (kernel in its process)",
}


def install_loommux(work: Path) -> Path:
    """Return the `loommux` command of a venv made in `work` with uv (LOOMMUX pinned)."""
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed to install loommux for the comparison"
    venv = work / "loommux-venv"
    subprocess.run([uv, "venv", "-q", str(venv)], check=True)
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), LOOMMUX], check=True
    )
    return venv / "bin" / "loommux"


def translator(gw: GatewayProcess, config: Path, *args: str) -> StdioServerParameters:
    """Return how to spawn `loomgate-mcp` over stdio for `gw`, with an empty config dir."""
    return stdio(gw, *args, env={"XDG_CONFIG_HOME": str(config)})


async def latency(
    gw: GatewayProcess, config: Path, loommux: Path, iterations: int
) -> tuple[list[str], list[str]]:
    """Return table rows comparing every path with the raw loop, and the per-hop budget rows."""
    limits = OutputLimits()
    async with (
        echo_server() as echo_url,
        raw_kernel() as raw,
        GatewayClient(gw.url, gw.token) as http,
        Client(translator(gw, config, "--kernel", "bench-latency")) as mcp,
        Client(NOOP) as noop,
        Client(relaying(echo_url)) as relay,
        Client(StdioServerParameters(command=str(loommux), cwd=str(config))) as rival,
    ):

        async def http_submit() -> None:
            reply = await http.submit(
                "bench-latency",
                "1+1",
                wait=1.0,
                head=limits.half_lines,
                tail=limits.half_lines,
                max_chars=limits.max_chars,
            )
            assert reply["execution"]["state"] == "completed", reply

        async def run_cell() -> None:
            result = await mcp.call_tool("run_cell", {"code": "1+1"})
            assert not result.is_error and result.structured_content["state"] == "completed"

        async def noop_call() -> None:
            await noop.call_tool("run_cell", {"code": "1+1"})

        async def relay_call() -> None:
            result = await relay.call_tool("run_cell", {"code": "1+1"})
            assert not result.is_error, result

        async def loommux_call() -> None:
            result = await rival.call_tool("run_python", {"freeform": "1+1"})
            assert not result.is_error, result

        runs = {
            "noop": noop_call,
            "relay": relay_call,
            "raw": lambda: raw_run(raw, "1+1"),
            "http": http_submit,
            "mcp": run_cell,
            "loommux": loommux_call,
        }
        samples = await interleave(runs, iterations, BLOCK)
        paced = await apart(runs, PACED_ROUNDS)
    loop = {name: statistics.median(values) for name, values in samples.items()}
    slow = {name: statistics.median(values) for name, values in paced.items()}
    rows = [
        f"| {label} | {loop[name]:.2f} | {versus(loop, name)} | {slow[name]:.2f} | "
        f"{versus(slow, name)} |"
        for name, label in PATHS.items()
    ]
    return rows, budget(loop, slow)


def versus(medians: dict[str, float], name: str) -> str:
    """Return a path's median as a multiple of the raw loop's (blank for the no-op floor)."""
    return "" if name in ("noop", "relay") else f"{medians[name] / medians['raw']:.2f}×"


def budget(loop: dict[str, float], slow: dict[str, float]) -> list[str]:
    """Return the per-hop rows: what each part of the chain adds, as medians' differences."""
    hops = [
        ("kernel and ZMQ (the raw loop)", lambda m: m["raw"]),
        ("gateway: the channel, recording, the reply (http − raw)", lambda m: m["http"] - m["raw"]),
        ("MCP SDK both ends and stdio (the no-op tool)", lambda m: m["noop"]),
        (
            "translator's own work (run_cell − http − no-op)",
            lambda m: m["mcp"] - m["http"] - m["noop"],
        ),
        ("one HTTP hop to a second process (relay − no-op)", lambda m: m["relay"] - m["noop"]),
        (
            "loomgate's work above the two-process floor (run_cell − raw − relay)",
            lambda m: m["mcp"] - m["raw"] - m["relay"],
        ),
    ]
    return [f"| {label} | {share(loop):.2f} | {share(slow):.2f} |" for label, share in hops]


def relaying(echo_url: str) -> StdioServerParameters:
    """Return how to spawn the no-op MCP server relaying each call to the echo server."""
    return NOOP.model_copy(update={"args": [*NOOP.args, "--relay", echo_url, "unused"]})


@contextlib.asynccontextmanager
async def echo_server() -> AsyncIterator[str]:
    """Yield the base URL of a running `echo_http_server.py`, stopped afterwards."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(ECHO_SERVER), str(port), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        assert await asyncio.wait_for(process.stdout.readline(), 30) == b"serving\n"
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        await process.wait()


async def apart(
    runs: Mapping[str, Callable[[], Awaitable[object]]], rounds: int
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


async def pool_ready(gw: GatewayProcess) -> None:
    """Return once the gateway's prewarmed kernel is started and idle again."""
    headers = {"Authorization": f"token {gw.token}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers) as http:
        for _ in range(600):
            if (await http.get("/api/loomgate/info")).json()["prewarmed"]:
                return
            await asyncio.sleep(0.05)
    raise TimeoutError("the gateway's pool did not refill within 30 s")


async def spawn(gw: GatewayProcess, config: Path) -> list[str]:
    """Return table rows for spawn → first result, attached and with a fresh kernel."""
    floor = [await noop_spawn() for _ in range(5)]
    attached = [
        await spawn_to_first_result(gw, config, "--kernel", "bench-latency") for _ in range(5)
    ]
    fresh = []
    for _ in range(3):
        await pool_ready(gw)
        fresh.append(await spawn_to_first_result(gw, config))
    return [
        f"| floor: spawn → first result of a no-op MCP server (median of 5) | "
        f"{statistics.median(floor):.2f} s |",
        f"| spawn → first run_cell result, attaching to a running kernel (median of 5) | "
        f"{statistics.median(attached):.2f} s |",
        f"| spawn → first run_cell result, new conversation kernel from the pool (median of 3) | "
        f"{statistics.median(fresh):.2f} s |",
    ]


async def profile(gw: GatewayProcess, config: Path, calls: int) -> list[str]:
    """Return the translator's own hot spots over `calls` run_cell calls, from cProfile."""
    dump = config / "translator.prof"
    params = translator(gw, config, "--kernel", "bench-latency")
    params = params.model_copy(update={"args": ["-m", "cProfile", "-o", str(dump), *params.args]})
    async with Client(params) as mcp:
        for _ in range(calls):
            await mcp.call_tool("run_cell", {"code": "1+1"})
    for _ in range(100):  # the profile is written as the translator exits after stdin closes
        if dump.exists():
            break
        await asyncio.sleep(0.1)
    report = io.StringIO()
    stats = pstats.Stats(str(dump), stream=report)
    stats.sort_stats("cumulative").print_stats(40)
    return ["```", report.getvalue().strip(), "```"]


async def main() -> None:
    """Run the benchmark; print (and optionally write) a Markdown report."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--profile", action="store_true", help="profile the translator instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = work / "config"
        config.mkdir()
        loommux = None if args.profile else install_loommux(work)
        as_installed(*([] if loommux is None else [loommux.parent.parent / "lib"]))
        gw = GatewayProcess(work / "state")
        gw.prewarm = 1
        gw.extra_args = ["--log-level", "WARNING"]
        gw.start()
        try:
            headers = {"Authorization": f"token {gw.token}"}
            async with httpx.AsyncClient(base_url=gw.url, headers=headers) as http:
                await http.post(API, json={"name": "bench-latency"})
                if loommux is None:
                    publish(await profile(gw, config, args.iterations), args.out)
                    return
                rows, hops = await latency(gw, config, loommux, args.iterations)
                spawn_rows = await spawn(gw, config)
                await http.delete(f"{API}/bench-latency")
        finally:
            gw.stop()
    publish(
        [
            f'## run_cell("1+1"), {args.iterations} iterations per path, interleaved in blocks '
            f"of {BLOCK} (ms)",
            "",
            f"| path | loop median | vs raw | {PACE} s apart (median of {PACED_ROUNDS}) | vs raw |",
            "|---|---|---|---|---|",
            *rows,
            "",
            "## Where the time goes: each hop's share (ms, differences of the medians above)",
            "",
            f"| hop | in a loop | {PACE} s apart |",
            "|---|---|---|",
            *hops,
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
