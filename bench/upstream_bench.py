"""Upstream benchmark: run_cell on a kernel that runs on a plain Jupyter server, through a
gateways.toml `kind = "jupyter"` entry, against the raw websocket to that server.

Run: `uv run python -m bench.upstream_bench [--iterations 200] [--rounds 3] [--out FILE.md]`

For each upstream (a stock Jupyter Server, Kernel Gateway, Enterprise Gateway with its local
process proxy), each round a new one, against one kernel, interleaved in blocks:
- ws: a client on the upstream's kernel websocket (JSON protocol, what jupyter_server's own
  gateway client speaks), executing `1+1` and waiting for the reply and IOPub idle: the floor;
- noop: the same client → a no-op MCP server over stdio (the SDK's own cost);
- mcp: the MCP SDK's client → `loomgate-mcp --gateway up` over stdio → the local gateway in
  upstream mode (started by the translator for the entry) → the upstream → the kernel.
Also paced (0.2 s apart), and the wall time of one cell printing 100,000 lines both ways.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from bench.gateway_bench import interleave, publish, spread
from bench.translator_bench import BLOCK, NOOP, PACED_ROUNDS, apart
from loomgate.translator.mcp_server.settings import Settings
from tests.support.gateways import stop_upstream_gateways
from tests.support.kernel_ws import KernelWebsocket
from tests.support.translators import TRANSLATOR
from tests.support.upstreams import KINDS, UpstreamProcess

LINES = 100_000
BIG_CELL = f"for n in range({LINES}):\n    print(n)"
BIG_RUNS = 3


async def streamed(ws: KernelWebsocket, code: str) -> int:
    """Return how many stdout lines `code` printed, once its reply and IOPub idle have come."""
    msg_id = await ws.execute(code)
    lines = 0
    replied = idle = False
    while not (replied and idle):
        msg = await ws.receive()
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["header"]["msg_type"]
        if msg["channel"] == "shell":
            replied = True
        elif kind == "stream":
            lines += str(msg["content"]["text"]).count("\n")
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            idle = True
    return lines


async def one_round(home: Path, kind: str, iterations: int) -> dict[str, Any]:
    """Return the medians (ms) of each path, loop and paced, and the big cell's wall times (s),
    on a new upstream of `kind`."""
    upstream = UpstreamProcess(home / "upstream", kind)
    upstream.start()
    config = home / "config"
    (config / "loomgate").mkdir(parents=True)
    (config / "loomgate" / "gateways.toml").write_text(
        f'[gateways.up]\nkind = "jupyter"\nurl = "{upstream.url}"\ntoken_env = "UP_TOKEN"\n'
    )
    state = home / "state"
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(config),
        "LOOMGATE_STATE_DIR": str(state),
        "UP_TOKEN": upstream.token,
    }
    settings = Settings(gateway="up", kernel="bench", autostart=True)
    translator = StdioServerParameters(
        command=TRANSLATOR[0], args=[*TRANSLATOR[1:], *settings.argv()], env=env
    )
    try:
        async with Client(translator) as mcp, Client(NOOP) as noop:
            first = await mcp.call_tool("run_cell", {"code": "1+1"})
            assert not first.is_error, first
            [kernel_id] = upstream.kernels()
            async with KernelWebsocket(upstream.url, upstream.token, kernel_id, binary=False) as ws:

                async def websocket() -> None:
                    reply, _ = await ws.run("1+1")
                    assert reply["content"]["status"] == "ok", reply

                async def run_cell() -> None:
                    result = await mcp.call_tool("run_cell", {"code": "1+1"})
                    assert not result.is_error
                    assert result.structured_content["state"] == "completed"

                async def noop_call() -> None:
                    await noop.call_tool("run_cell", {"code": "1+1"})

                runs = {"ws": websocket, "noop": noop_call, "mcp": run_cell}
                loop = await interleave(runs, iterations, BLOCK)
                paced = await apart(runs, PACED_ROUNDS)
                big: dict[str, list[float]] = {"ws": [], "mcp": []}
                for _ in range(BIG_RUNS):
                    began = time.perf_counter()
                    assert await streamed(ws, BIG_CELL) == LINES
                    big["ws"].append(time.perf_counter() - began)
                    began = time.perf_counter()
                    result = await mcp.call_tool(
                        "run_cell", {"code": BIG_CELL, "wait_seconds": 300}
                    )
                    assert result.structured_content["state"] == "completed", result
                    big["mcp"].append(time.perf_counter() - began)
    finally:
        stop_upstream_gateways(state)
        upstream.stop()
    return {
        "loop": {name: statistics.median(values) for name, values in loop.items()},
        "paced": {name: statistics.median(values) for name, values in paced.items()},
        "big": {name: statistics.median(values) for name, values in big.items()},
    }


def row(kind: str, results: list[dict[str, Any]]) -> str:
    """Return the report's row of one upstream: each median and ratio over the rounds."""

    def column(part: str, name: str) -> str:
        return spread([r[part][name] for r in results])

    def ratio(part: str, name: str = "mcp") -> str:
        return spread([r[part][name] / r[part]["ws"] for r in results]) + "×"

    return (
        f"| {kind} | {column('loop', 'ws')} | {column('loop', 'mcp')} | {ratio('loop')} | "
        f"{column('paced', 'ws')} | {column('paced', 'mcp')} | {ratio('paced')} | "
        f"{column('paced', 'noop')} ({ratio('paced', 'noop')}) | "
        f"{column('big', 'ws')} | {column('big', 'mcp')} | {ratio('big')} |"
    )


async def main() -> None:
    """Run the rounds for each upstream and print (and write) the report."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), choices=KINDS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = [
        "## run_cell on a kernel of a plain Jupyter server (upstream mode)",
        "",
        f"`uv run python -m bench.upstream_bench`: {args.rounds} rounds per upstream, each a new "
        f"upstream and a new loomgate-mcp; {args.iterations} calls of `1+1` per path interleaved "
        f"in blocks of {BLOCK}, then {PACED_ROUNDS} calls 0.2 s apart (medians in ms); then a "
        f"cell printing {LINES:,} lines, {BIG_RUNS} times each way (median wall time in s). "
        f"Each cell: median (range) over the rounds. Python {sys.version.split()[0]}.",
        "",
        "| upstream | ws loop, ms | run_cell loop, ms | × ws | ws paced | run_cell paced | × ws "
        f"| the SDK alone paced (× ws) | {LINES:,} lines ws, s | run_cell, s | × ws |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="loomgate-upstream-bench-") as work:
        for kind in args.kinds:
            results = [
                await one_round(Path(work) / f"{kind}-{index}", kind, args.iterations)
                for index in range(args.rounds)
            ]

            lines.append(row(kind, results))
    publish(lines, args.out)


if __name__ == "__main__":
    asyncio.run(main())
