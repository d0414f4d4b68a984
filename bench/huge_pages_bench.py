"""The kernels' malloc asking for huge pages (residency/kernel_command.py), beside the same
gateway without it, in one run: what it costs a kernel that never checkpoints, and what it
gives one that does.

Run: `uv run --frozen python -m bench.huge_pages_bench [--rounds 8] [--out F.md]`

Two gateways (default profile workspace, prewarm off), the second started with the setting
taken out (its launcher replaces `with_huge_pages` by a copy of the environment; checked in each
kernel's environment). Each round, on each gateway in a turn that changes every round: a kernel
started (POST kernels → idle), its own resident memory once idle, `1+1` 20 times (checked: `2`),
1 GiB allocated and every page touched (checked: its length), a checkpoint of it (checked: 201),
and the kernel stopped, its processes gone before the next.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

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
    started_gateways,
    status_kib,
)
from tests.support.cells import output_texts
from tests.support.gateways import GatewayProcess

CELLS = 20
GiB = 2**30
FILL = f"data = bytearray({GiB})\nfor i in range(0, len(data), 4096): data[i] = 1\nprint(len(data))"
TUNABLES = "print(__import__('os').environ.get('GLIBC_TUNABLES'))"

# The second gateway's launcher (`python -c WITHOUT`, then the gateway's own command): the
# provisioner's environment step made a plain copy, then the gateway run as `-m` runs it.
WITHOUT = (
    "import runpy, sys\n"
    "assert sys.argv[1:4] == [sys.executable, '-m', 'loomgate.gateway'], sys.argv\n"
    "import loomgate.gateway.residency.provisioner as provisioner\n"
    "provisioner.with_huge_pages = dict\n"
    "sys.argv = sys.argv[:1] + sys.argv[4:]\n"
    "runpy.run_module('loomgate.gateway', run_name='__main__', alter_sys=True)\n"
)


async def cell(http: httpx.AsyncClient, kernel: str, code: str) -> str:
    """Run `code`; return what it printed (checked completed)."""
    body = {"code": code, "wait": 120, "head": 20}
    r = await http.post(f"{API}/{kernel}/executions", json=body)
    execution = r.json()["execution"]
    assert execution["state"] == "completed", execution
    return "".join(output_texts(execution))


async def one_round(
    gateway: GatewayProcess, http: httpx.AsyncClient, huge: bool, figures: dict[str, list[float]]
) -> None:
    """Start a kernel on `gateway`, measure it, stop it; add its figures."""
    began = time.perf_counter()
    r = await http.post(API, json={})
    assert r.status_code == 201, r.text
    kernel = r.json()["kernel"]["id"]
    figures["start"].append((time.perf_counter() - began) * 1000)
    try:
        tunables = await cell(http, kernel, TUNABLES)
        assert ("glibc.malloc.hugetlb=1" in tunables) is huge, tunables
        pids = processes_of(gateway, kernel)
        figures["rss"].append(status_kib(pids["kernel"], "VmRSS:") / 1024)
        times = []
        for _ in range(CELLS):
            began = time.perf_counter()
            assert await cell(http, kernel, "print(1+1)") == "2"
            times.append((time.perf_counter() - began) * 1000)
        figures["cell"].append(statistics.median(times))
        assert await cell(http, kernel, FILL) == str(GiB)
        began = time.perf_counter()
        r = await http.post(f"{API}/{kernel}/checkpoints", json={"name": "cp"})
        figures["checkpoint"].append((time.perf_counter() - began) * 1000)
        assert r.status_code == 201, r.text
    finally:
        await http.delete(f"{API}/{kernel}")
    # The kernel, and bubblewrap as the gateway launched it (reaped by it); the sandbox's init,
    # orphaned once bubblewrap exited with the first kernel, is reaped by the system's.
    await reaped([pid for role, pid in pids.items() if role != "init"])


def report(figures: dict[str, dict[str, list[float]]], rounds: int, loads: str) -> list[str]:
    """Return the Markdown report."""
    rows = (
        ("POST kernels → idle", "start", "ms", 0),
        ("its resident memory, idle", "rss", "MiB", 1),
        (f"`1+1`, median of {CELLS}", "cell", "ms", 1),
        ("a checkpoint of it holding 1 GiB", "checkpoint", "ms", 1),
    )
    lines = [
        "# The kernels' malloc asking for huge pages, beside the same gateway without it",
        "",
        f"Run on {time.strftime('%Y-%m-%d')}. Default profile (workspace, bubblewrap). Load "
        f"averages (1, 5, 15 min): {loads}. {rounds} rounds; medians, ranges in brackets.",
        "",
        "| figure | without | with (the gateway's) |",
        "|---|---|---|",
    ]
    for label, key, unit, digits in rows:
        without, with_ = figures["without"][key], figures["with"][key]
        lines.append(
            f"| {label} | {spread(without, unit, digits)} | {spread(with_, unit, digits)} |"
        )
    return lines


async def main() -> None:
    """Start both gateways, run the rounds, print (and write) the report."""
    parser = rounds_parser(__doc__, rounds=8)
    args = parser.parse_args()
    keys = ("start", "rss", "cell", "checkpoint")
    with bench_root("huge-pages-bench") as (root, _project):
        gateways = {
            "with": gateway_in(root, "with", "workspace"),
            "without": gateway_in(root, "without", "workspace"),
        }
        gateways["without"].launcher = [sys.executable, "-c", WITHOUT]
        figures = {side: {key: list[float]() for key in keys} for side in gateways}
        before = load()
        async with started_gateways(gateways) as clients:
            for turn in range(args.rounds + 1):  # the first warms the page cache, uncounted
                for side in rotated(tuple(gateways), turn):
                    kept = figures[side] if turn else {key: [] for key in keys}
                    await one_round(gateways[side], clients[side], side == "with", kept)
            loads = f"{before} at the start, {load()} at the end"
    publish(report(figures, args.rounds, loads), args.out)


if __name__ == "__main__":
    asyncio.run(main())
