"""Kernels side by side: ipykernel (`python3`, loomgate's default) and ipymini (`py`, the seed's
default) through one gateway under the default profile, in one run.

Run: `uv run --frozen python -m bench.kernel_bench [--rounds 8] [--out F.md]`

Each round (after one uncounted), for each kernel in a turn that changes every round: a kernel
started (POST kernels with its spec → idle), 20 cells of `1+1` (each checked: `2`), and a cell
printing 10,000 lines (checked: all 10,000 in its record), then the kernel stopped and its
processes waited for. Reported: each kernel's figures and the same-round ratios of ipymini to
ipykernel.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from bench.gateway_bench import publish, rotated, rounds_parser
from bench.iopub_bench import ratio_cell
from bench.sandbox_bench import API, bench_root, gateway_in, load, reaped, spread
from tests.support.gateways import GatewayProcess, child_pids

KERNELS = {"ipykernel": "python3", "ipymini": "py"}
LINES = 10_000
COUNT = f"for i in range({LINES}):\n    print(i)"
CELLS = 20
FIGURES = ("start", "cell", "lines")


async def started(http: httpx.AsyncClient, spec: str, cwd: Path) -> dict[str, Any]:
    """Start a kernel of `spec` working in `cwd` under the default profile; return it once
    idle (checked)."""
    r = await http.post(API, json={"kernel_spec": spec, "cwd": str(cwd)})
    assert r.status_code == 201, r.text
    kernel: dict[str, Any] = r.json()["kernel"]
    while kernel["state"] != "idle":
        assert kernel["alive"], kernel
        await asyncio.sleep(0.005)
        kernel = (await http.get(f"{API}/{kernel['id']}")).json()["kernel"]
    assert (kernel["kernel_spec"], kernel["sandbox"]["profile"]) == (spec, "workspace"), kernel
    return kernel


async def cell(http: httpx.AsyncClient, kernel_id: str, code: str) -> dict[str, Any]:
    """Run `code`; return its execution once completed (checked)."""
    body = {"code": code, "wait": 300, "head": 1, "tail": 1}
    r = await http.post(f"{API}/{kernel_id}/executions", json=body)
    execution: dict[str, Any] = r.json()["execution"]
    assert execution["state"] == "completed", execution
    return execution


async def round_on(
    gateway: GatewayProcess,
    http: httpx.AsyncClient,
    spec: str,
    cwd: Path,
    figures: dict[str, list[float]],
) -> None:
    """One round's figures of a kernel of `spec`, added to `figures`."""
    began = time.perf_counter()
    kernel = await started(http, spec, cwd)
    figures["start"].append((time.perf_counter() - began) * 1000)
    assert gateway.proc is not None
    pids = child_pids(gateway.proc.pid)  # its sandbox's processes, waited for at its end
    try:
        times = []
        for _ in range(CELLS):
            began = time.perf_counter()
            execution = await cell(http, kernel["id"], "1+1")
            times.append((time.perf_counter() - began) * 1000)
            assert [line["text"] for line in execution["output"]["head"]] == ["2"], execution
        figures["cell"].append(statistics.median(times))
        began = time.perf_counter()
        execution = await cell(http, kernel["id"], COUNT)
        figures["lines"].append((time.perf_counter() - began) * 1000)
        assert execution["streams"]["stdout"]["lines"] == LINES, execution["streams"]
        assert execution["output"]["tail"][-1]["text"] == str(LINES - 1), execution["output"]
    finally:
        r = await http.delete(f"{API}/{kernel['id']}")
        assert r.status_code == 200, r.text
        await reaped(pids)


def report(figures: dict[str, dict[str, list[float]]], rounds: int, loads: str) -> list[str]:
    """Return the Markdown report."""
    ipykernel, ipymini = figures["ipykernel"], figures["ipymini"]
    rows = [
        ("kernel start → idle", "start", 0),
        ("`1+1`, median of 20", "cell", 2),
        (f"a cell of {LINES:,} lines, submit → end", "lines", 0),
    ]
    lines = [
        "# Kernels: ipykernel beside ipymini, through the gateway",
        "",
        f"Default profile (workspace, bubblewrap). Load averages (1, 5, 15 min): {loads}. "
        f"{rounds} rounds; medians, ranges in brackets.",
        "",
        "| | ipykernel (`python3`) | ipymini (`py`) | ipymini / ipykernel, same round |",
        "|---|---|---|---|",
    ]
    for label, key, digits in rows:
        lines.append(
            f"| {label} | {spread(ipykernel[key], 'ms', digits)} | "
            f"{spread(ipymini[key], 'ms', digits)} | {ratio_cell(ipymini[key], ipykernel[key])} |"
        )
    return lines


async def main() -> None:
    """Start the gateway, run the rounds, print (and write) the report."""
    parser = rounds_parser(__doc__, rounds=8)
    args = parser.parse_args()
    names = tuple(KERNELS)
    with bench_root("kernels") as (root, project):
        gateway = gateway_in(root, "gateway", "workspace")
        figures = {name: {key: list[float]() for key in FIGURES} for name in names}
        try:
            before = load()
            gateway.start()
            async with httpx.AsyncClient(
                base_url=gateway.url, headers=gateway.headers, timeout=600
            ) as http:
                for turn in range(args.rounds + 1):  # the first warms the page cache, uncounted
                    for name in rotated(names, turn):
                        kept = figures[name] if turn else {key: [] for key in FIGURES}
                        await round_on(gateway, http, KERNELS[name], project, kept)
            loads = f"{before} at the start, {load()} at the end"
        finally:
            gateway.stop()
    publish(report(figures, args.rounds, loads), args.out)


if __name__ == "__main__":
    asyncio.run(main())
