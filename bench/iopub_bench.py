"""IOPub benchmark: the gateway as shipped (no IOPub message dropped: its subscriber and the
kernel's publisher queue what is not read yet) beside one with ZMQ's default high-water mark on
both, in one run, kernels under the default profile.

Run: `uv run --frozen python -m bench.iopub_bench [--rounds 10] [--out F.md]`

Each round (after one uncounted), on each gateway in a turn that changes every round: a kernel
started (POST kernels → idle), 20 cells of `1+1` (each checked), a cell printing 20,000 lines
one message each, then the same with the gateway sharing one CPU with three busy loops
(`tests/support/contention.py`); each flood's lines counted from its record, its time from
submit to end. Reported: each side's figures and the same-round ratios of the shipped gateway
to the other.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.gateway_bench import publish, rotated, rounds_parser
from bench.sandbox_bench import (
    API,
    bench_root,
    gateway_in,
    load,
    processes_of,
    reaped,
    spread,
    started,
)
from tests.support.contention import slowed
from tests.support.gateways import GatewayProcess

LINES = 20_000
FLOOD = f"for i in range({LINES}):\n    print(i, flush=True)"
CELLS = 20
SIDES = ("shipped", "dropping")
FIGURES = ("start", "cell", "flood quiet", "flood slowed", "lines quiet", "lines slowed")

# The second gateway's launcher (`python -c AT_ZMQ_DEFAULT`, then the gateway's own command):
# ZMQ's default high-water mark back on its subscriber, and its kernels' publishers left so.
AT_ZMQ_DEFAULT = (
    "import runpy, sys\n"
    "assert sys.argv[1:4] == [sys.executable, '-m', 'loomgate.gateway'], sys.argv\n"
    "import loomgate.gateway.kernels.zmq_channels as channels\n"
    "import loomgate.gateway.kernels.kernel as kernel\n"
    "channels.IOPUB_RCVHWM = 1000\n"
    "kernel.queue_every_message = lambda *args: None\n"
    "print(f'{channels.IOPUB_RCVHWM=}', file=sys.stderr, flush=True)\n"
    "sys.argv = sys.argv[:1] + sys.argv[4:]\n"
    "runpy.run_module('loomgate.gateway', run_name='__main__', alter_sys=True)\n"
)
SAID = "channels.IOPUB_RCVHWM=1000"


async def cell(http: httpx.AsyncClient, kernel_id: str, code: str) -> dict[str, Any]:
    """Run `code`; return its execution once completed (checked)."""
    body = {"code": code, "wait": 300, "head": 1, "tail": 0}
    r = await http.post(f"{API}/{kernel_id}/executions", json=body)
    execution: dict[str, Any] = r.json()["execution"]
    assert execution["state"] == "completed", execution
    return execution


async def round_on(
    gateway: GatewayProcess, http: httpx.AsyncClient, cwd: Path, figures: dict[str, list[float]]
) -> None:
    """One round's figures of `gateway`, added to `figures`."""
    began = time.perf_counter()
    kernel = await started(http, "workspace", cwd)  # the default profile
    figures["start"].append((time.perf_counter() - began) * 1000)
    try:
        times = []
        for _ in range(CELLS):
            began = time.perf_counter()
            execution = await cell(http, kernel["id"], "1+1")
            times.append((time.perf_counter() - began) * 1000)
            assert [line["text"] for line in execution["output"]["head"]] == ["2"], execution
        figures["cell"].append(statistics.median(times))
        for load_name in ("quiet", "slowed"):
            assert gateway.proc is not None
            began = time.perf_counter()
            if load_name == "slowed":
                with slowed(gateway.proc.pid):
                    execution = await cell(http, kernel["id"], FLOOD)
            else:
                execution = await cell(http, kernel["id"], FLOOD)
            figures[f"flood {load_name}"].append(time.perf_counter() - began)
            figures[f"lines {load_name}"].append(execution["streams"]["stdout"]["lines"])
    finally:
        pids = processes_of(gateway, kernel["id"])
        r = await http.delete(f"{API}/{kernel['id']}")
        assert r.status_code == 200, r.text
        await reaped(pids.values())


def ratio_cell(ours: list[float], other: list[float]) -> str:
    values = [a / b for a, b in zip(ours, other, strict=True)]
    return f"{statistics.median(values):.3f}× ({min(values):.3f}–{max(values):.3f})"


def counted(values: list[float]) -> str:
    """Return a median count with the range."""
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"


def report(figures: dict[str, dict[str, list[float]]], rounds: int, loads: str) -> list[str]:
    """Return the Markdown report."""
    shipped, dropping = figures["shipped"], figures["dropping"]
    rows = [
        ("kernel start → idle", "start", "ms", 0),
        ("`1+1`, median of 20", "cell", "ms", 1),
        ("flood of 20,000 lines, quiet", "flood quiet", "s", 2),
        ("flood, the gateway slowed", "flood slowed", "s", 2),
    ]
    lines = [
        "# IOPub: no message dropped, beside ZMQ's default high-water mark",
        "",
        f"Load averages (1, 5, 15 min): {loads}. {rounds} rounds; medians, ranges in brackets.",
        "",
        "| | ZMQ's default (drops) | as shipped (queues) | shipped / default, same round |",
        "|---|---|---|---|",
    ]
    for label, key, unit, digits in rows:
        lines.append(
            f"| {label} | {spread(dropping[key], unit, digits)} | "
            f"{spread(shipped[key], unit, digits)} | {ratio_cell(shipped[key], dropping[key])} |"
        )
    for load_name in ("quiet", "slowed"):
        key = f"lines {load_name}"
        lines.append(
            f"| lines kept of {LINES:,}, {load_name} | {counted(dropping[key])} | "
            f"{counted(shipped[key])} | |"
        )
    return lines


async def main() -> None:
    """Start both gateways, run the rounds, print (and write) the report."""
    parser = rounds_parser(__doc__, rounds=10)
    args = parser.parse_args()
    with bench_root("iopub") as (root, project):
        gateways = {side: gateway_in(root, side, "workspace") for side in SIDES}
        gateways["dropping"].launcher = [sys.executable, "-c", AT_ZMQ_DEFAULT]
        figures = {side: {key: list[float]() for key in FIGURES} for side in SIDES}
        clients: dict[str, httpx.AsyncClient] = {}
        try:
            before = load()
            for side, gateway in gateways.items():
                gateway.start()
                clients[side] = httpx.AsyncClient(
                    base_url=gateway.url, headers=gateway.headers, timeout=600
                )
            log = gateways["dropping"].log_path.read_text()
            assert SAID in log, "the second gateway's high-water mark was not set"
            for turn in range(args.rounds + 1):  # the first warms the page cache, uncounted
                for side in rotated(SIDES, turn):
                    kept = figures[side] if turn else {key: [] for key in FIGURES}
                    await round_on(gateways[side], clients[side], project, kept)
            loads = f"{before} at the start, {load()} at the end"
        finally:
            for http in clients.values():
                await http.aclose()
            for gateway in gateways.values():
                gateway.stop()
    publish(report(figures, args.rounds, loads), args.out)


if __name__ == "__main__":
    asyncio.run(main())
