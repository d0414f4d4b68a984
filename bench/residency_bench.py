"""Residency benchmark: how long a restarted gateway takes to take back the kernels it left.

Run: `uv run python -m bench.residency_bench [--counts 1,10,50] [--rounds 3] [--out FILE.md]`

For each count N: start a gateway, create N kernels (each runs one cell), SIGKILL the gateway,
start it again and time, from the spawn, the first kernel listing (loomgate endpoints wait
until every kernel is taken back), beside the floor: the same start with no kernel to take
back, in the same round. The taking back alone is what the gateway logs. Then a translator: a
`loomgate-mcp` whose local gateway is SIGKILLed, time of its next run_cell (it starts the
gateway again, which takes the kernel back), against a cold autostart with nothing to take back.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from mcp import Client, StdioServerParameters

from bench.gateway_bench import publish, rounds_parser
from loomgate.shared.paths import GATEWAY_FILE, LOG_FILE, read_gateway_file
from loomgate.translator.client.local_gateway import open_local_client
from loomgate.translator.client.target import GatewayTarget
from loomgate.translator.mcp_server.settings import Settings
from tests.support.gateways import GatewayProcess, free_port, stop_local_gateway, wait_gone
from tests.support.translators import TRANSLATOR

API = "/api/loomgate/kernels"


def timed_start(gateway: GatewayProcess) -> tuple[float, float, int]:
    """Start `gateway`; return seconds from spawn until it lists every kernel taken back, the
    time the gateway itself says the taking back took (0 with none), and how many it runs."""
    began = time.perf_counter()
    gateway.start()  # returns once gateway.json exists and /info answers
    r = httpx.get(f"{gateway.url}{API}", headers=gateway.headers, timeout=120)
    r.raise_for_status()
    ready = time.perf_counter() - began
    log = (gateway.state_dir / LOG_FILE).read_text()
    took = re.findall(r"Took back (\d+) of (\d+) kernels in ([\d.]+) s", log)
    alive = sum(1 for kernel in r.json()["kernels"] if kernel["alive"])
    return ready, float(took[-1][2]) if took else 0.0, alive


async def adoption_round(directory: Path, count: int) -> tuple[float, float, float]:
    """Return (floor, start → all taken back, the taking back alone) in seconds."""
    await asyncio.to_thread(directory.mkdir, parents=True)
    floor = GatewayProcess(directory / "floor")
    try:
        floor_ready, _, _ = timed_start(floor)
    finally:
        floor.stop()
    gateway = GatewayProcess(directory / f"kernels-{count}")
    try:
        gateway.start()
        async with httpx.AsyncClient(
            base_url=gateway.url, headers=gateway.headers, timeout=300
        ) as http:
            for i in range(count):
                r = await http.post(API, json={"name": f"k{i}"})
                r.raise_for_status()
                await http.post(f"{API}/k{i}/executions", json={"code": f"v = {i}", "wait": 60})
        gateway.kill()
        ready, taking_back, alive = timed_start(gateway)
        assert alive == count, f"took back {alive} of {count}"
    finally:
        gateway.stop()
    return floor_ready, ready, taking_back


async def translator_round(directory: Path) -> tuple[float, float]:
    """Return (cold autostart, call after a gateway SIGKILL) in seconds for one translator."""
    await asyncio.to_thread(directory.mkdir, parents=True)
    os.environ["LOOMGATE_STATE_DIR"] = str(directory)
    target = GatewayTarget(f"http://127.0.0.1:{free_port()}", None, True, None, True)
    began = time.perf_counter()
    client = await open_local_client(target, autostart=True)
    cold = time.perf_counter() - began
    await client.aclose()
    params = StdioServerParameters(
        command=TRANSLATOR[0], args=[*TRANSLATOR[1:], *Settings().argv()], env=dict(os.environ)
    )
    try:
        async with Client(params) as mcp:
            first = await mcp.call_tool("run_cell", {"code": "x = 1"})
            assert not first.is_error
            info = read_gateway_file(directory)
            assert info is not None
            os.kill(info["pid"], signal.SIGKILL)
            wait_gone({info["pid"]}, 30)
            began = time.perf_counter()
            after = await mcp.call_tool("run_cell", {"code": "x + 1"})
            carried = time.perf_counter() - began
            assert not after.is_error and after.structured_content["state"] == "completed"
            await mcp.call_tool("stop_kernel", {"kernel": after.structured_content["kernel"]})
    finally:
        stop_local_gateway(directory)
        (directory / GATEWAY_FILE).unlink(missing_ok=True)
    return cold, carried


def spread(values: list[float]) -> str:
    """Return a median with the range, in seconds."""
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


async def main() -> None:
    """Run the rounds and print (and optionally write) the report."""
    parser = rounds_parser(__doc__, rounds=3)
    parser.add_argument("--counts", default="1,10,50")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]
    lines = [
        f"## Kernels taken back after a gateway SIGKILL ({args.rounds} rounds; median, range)",
        "",
        "| kernels | floor: start → serving, nothing to take back "
        "| start → serving, all taken back | the taking back alone (gateway log) |",
        "|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for count in counts:
            floors, readies, alone = [], [], []
            for round_ in range(args.rounds):
                floor, ready, taking_back = await adoption_round(
                    Path(tmp) / f"{count}-{round_}", count
                )
                floors.append(floor)
                readies.append(ready)
                alone.append(taking_back)
            lines.append(f"| {count} | {spread(floors)} | {spread(readies)} | {spread(alone)} |")
        colds, carried = [], []
        for round_ in range(args.rounds):
            cold, after = await translator_round(Path(tmp) / f"translator-{round_}")
            colds.append(cold)
            carried.append(after)
    lines += [
        "",
        "## A translator whose local gateway was SIGKILLed",
        "",
        "| measure | value |",
        "|---|---|",
        f"| floor: autostart of the local gateway, nothing to take back | {spread(colds)} |",
        "| next run_cell: gateway started again, kernel taken back, cell run | "
        f"{spread(carried)} |",
    ]
    publish(lines, args.out)


if __name__ == "__main__":
    asyncio.run(main())
