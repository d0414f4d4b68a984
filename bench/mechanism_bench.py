"""Kernel start and run_cell per sandbox mechanism, side by side in one run.

Run: `uv run --frozen python -m bench.mechanism_bench [--rounds 20] [--iterations 1000]
[--out F.md]`

One gateway per mechanism (`LOOMGATE_SANDBOX_MECHANISM`: bubblewrap on PATH, the shipped
bubblewrap, Landlock alone), each with default none, each checked to run the mechanism it was
given. Kernel start (POST kernels → idle, prewarm off; each once the last kernel's processes are
gone): on each gateway a `none` and a `workspace` kernel (its own network namespace, the bridge
and the gateway's proxy; under Landlock alone, which refuses the shipped workspace, workspace
redefined with no writable dir), all six in a new order each round; each mechanism held to its
goal by the median of its same-gateway, same-round differences (workspace − none). run_cell("1+1")
through the gateway's submit: a workspace kernel on each gateway, a none kernel and a second
none kernel (the floor: what two kernels differ by), one cell each in turn, each checked to
answer `2`. Goals (issue 42): start ≤ +50 ms, run_cell ≤ 1.03× of none.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from bench.gateway_bench import KEEP_RESULTS, interleave, publish
from bench.sandbox_bench import (
    API,
    FLOOR,
    bench_root,
    gateway_in,
    load,
    reaped,
    spread,
    started,
    started_gateways,
)
from loomgate.gateway.residency.resident import RESIDENT_FILE
from loomgate.gateway.sandbox.confinement.mechanism import ENV
from tests.support.cells import output_texts
from tests.support.gateways import GatewayProcess, child_pids

# How each mechanism's description starts (bubblewrap on PATH names its path instead).
MECHANISMS = {
    "bubblewrap": f"({shutil.which('bwrap')})",
    "shipped": "(shipped with loomgate)",
    "landlock": "landlock only",
}
PROFILES = ("none", "workspace")
GOALS = {"start": 50.0, "run_cell": 1.03}


def mechanism_gateway(root: Path, mechanism: str) -> GatewayProcess:
    """Return a (not started) gateway with default none whose confined kernels run under
    `mechanism` alone."""
    gateway = gateway_in(root, mechanism, "none")
    gateway.env[ENV] = mechanism
    if mechanism == "landlock":  # its project's .git cannot stay read-only there
        with (root / mechanism / "config" / "loomgate" / "sandbox.toml").open("a") as config:
            config.write("\n[profiles.workspace]\nwritable = []\n")
    return gateway


async def checked(http: httpx.AsyncClient, mechanism: str) -> str:
    """Return the gateway's description of its mechanism, checked to be `mechanism`'s."""
    info = (await http.get("/api/loomgate/info")).json()
    described = str(info["sandbox_mechanism"])
    assert MECHANISMS[mechanism] in described, (mechanism, described, info["sandbox_refused"])
    return described


def pids_of(gateway: GatewayProcess, kernel_id: str) -> list[int]:
    """Return a kernel's processes: the provisioner's identity, the sandbox's init when there is
    one, and their children (the kernel, the bridge)."""
    resident = json.loads((gateway.state_dir / "kernels" / kernel_id / RESIDENT_FILE).read_text())
    provisioner = resident["provisioner"]
    roots = [provisioner["identity"]["pid"]]
    if init := (provisioner.get("sandbox") or {}).get("init"):
        roots.append(init["pid"])
    return [*roots, *(child for pid in roots for child in child_pids(pid))]


async def starts(
    gateways: dict[str, GatewayProcess],
    clients: dict[str, httpx.AsyncClient],
    cwd: Path,
    rounds: int,
) -> dict[tuple[str, str], list[float]]:
    """Return start times (ms) per (mechanism, profile), all sides in a new order each round."""
    sides = tuple((m, p) for m in clients for p in PROFILES)
    times: dict[tuple[str, str], list[float]] = {side: [] for side in sides}
    for turn in range(rounds + 1):  # the first turn warms the page cache and is not counted
        order = [sides[(turn * 5 + i) % len(sides)] for i in range(len(sides))]
        if turn % 2:
            order.reverse()
        for mechanism, profile in order:
            http = clients[mechanism]
            began = time.perf_counter()
            kernel = await started(http, profile, cwd)
            took = (time.perf_counter() - began) * 1000
            gone = pids_of(gateways[mechanism], kernel["id"])
            if turn:
                times[(mechanism, profile)].append(took)
            r = await http.delete(f"{API}/{kernel['id']}")
            assert r.status_code == 200, r.text
            await reaped(gone)
    return times


async def cells(
    clients: dict[str, httpx.AsyncClient], cwd: Path, iterations: int
) -> dict[str, list[float]]:
    """Return run_cell("1+1") latencies (ms): on each gateway a none and a workspace kernel
    (each mechanism held to its own gateway's none), and on the first a second none kernel (the
    floor), the kernels taking turns cell by cell, each cell checked to answer `2`."""
    first = next(iter(clients))
    sides = [(FLOOR, clients[first], "none")]
    sides += [(f"{p}, {m}", clients[m], p) for m in clients for p in PROFILES]
    kernels: dict[str, tuple[httpx.AsyncClient, str]] = {}
    try:
        for name, http, profile in sides:
            kernels[name] = (http, (await started(http, profile, cwd))["id"])

        def run_on(http: httpx.AsyncClient, kernel_id: str) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                r = await http.post(
                    f"{API}/{kernel_id}/executions", json={"code": "1+1", "wait": 60, "head": 20}
                )
                execution = r.json()["execution"]
                assert execution["state"] == "completed", execution
                assert output_texts(execution) == ["2"], execution["output"]

            return run

        for http, kernel_id in kernels.values():
            r = await http.post(
                f"{API}/{kernel_id}/executions", json={"code": KEEP_RESULTS, "wait": 60}
            )
            assert r.json()["execution"]["state"] == "completed", r.text
        return await interleave(
            {name: run_on(http, k) for name, (http, k) in kernels.items()}, iterations, 1
        )
    finally:
        for http, kernel_id in kernels.values():
            await http.delete(f"{API}/{kernel_id}")


def report(
    args: argparse.Namespace,
    described: dict[str, str],
    times: dict[tuple[str, str], list[float]],
    samples: dict[str, list[float]],
    loads: str,
) -> list[str]:
    """Return the Markdown report."""
    lines = [
        "# Kernel start and run_cell per sandbox mechanism (one run)",
        "",
        f"Load averages (1, 5, 15 min): {loads}. Medians, ranges in brackets.",
        "",
        *(f"- `{m}`: {d}" for m, d in described.items()),
        "",
        f"## Kernel start, prewarm off ({args.rounds} rounds, all six sides in a new order)",
        "",
        "| mechanism | none | workspace | workspace − none, same gateway and round "
        "| goal ≤ +50 ms |",
        "|---|---|---|---|---|",
    ]
    for mechanism in described:
        none, workspace = times[(mechanism, "none")], times[(mechanism, "workspace")]
        diffs = [w - n for w, n in zip(workspace, none, strict=True)]
        held = statistics.median(diffs)
        lines.append(
            f"| {mechanism} | {spread(none)} | {spread(workspace)} | {spread(diffs, sign='+')} "
            f"| {'met' if held <= GOALS['start'] else 'missed'} |"
        )
    first = next(iter(described))
    lines += [
        "",
        f'## run_cell("1+1") ({args.iterations} each, the {len(samples)} kernels in turn)',
        "",
        "| mechanism | none | workspace | workspace / none, of the medians | goal ≤ 1.03× |",
        "|---|---|---|---|---|",
    ]
    for mechanism in described:
        none, workspace = samples[f"none, {mechanism}"], samples[f"workspace, {mechanism}"]
        ratio = statistics.median(workspace) / statistics.median(none)
        lines.append(
            f"| {mechanism} | {spread(none, digits=1)} | {spread(workspace, digits=1)} "
            f"| {ratio:.3f}× | {'met' if ratio <= GOALS['run_cell'] else 'missed'} |"
        )
    floor = statistics.median(samples[FLOOR]) / statistics.median(samples[f"none, {first}"])
    lines.append(
        f"| the floor: {FLOOR} on `{first}`'s gateway | | {spread(samples[FLOOR], digits=1)} "
        f"| {floor:.3f}× | |"
    )
    return lines


async def main() -> None:
    """Run both parts and print (and optionally write) the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20, help="kernel starts per side")
    parser.add_argument("--iterations", type=int, default=1000, help='run_cell("1+1") per kernel')
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out.resolve() if args.out else None
    with bench_root("mechanism-bench") as (root, project):
        gateways = {m: mechanism_gateway(root, m) for m in MECHANISMS}
        before = load()
        async with started_gateways(gateways) as clients:
            described = {m: await checked(clients[m], m) for m in MECHANISMS}
            times = await starts(gateways, clients, project, args.rounds)
            samples = await cells(clients, project, args.iterations)
            loads = f"{before} at the start, {load()} at the end"
    publish(report(args, described, times, samples, loads), out)


if __name__ == "__main__":
    asyncio.run(main())
