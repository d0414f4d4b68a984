"""Sandbox benchmark, side by side in one run: kernels under the profiles none, workspace, strict.

Run: `uv run --frozen python -m bench.sandbox_bench [--rounds 5] [--big-rounds 3] [--out F.md]`

On one gateway whose default profile is none, each kernel asking for its profile: kernel start
(POST kernels → idle, prewarm off; each start once the last kernel's processes are gone), held
to its goal by both the median of the same-round differences and the medians' difference, with
the memory of each kernel just started (its own RSS, and that of bubblewrap's monitor and the
sandbox's init, named by its resident.json);
run_cell("1+1") as the gateway's submit, one kernel per profile and a second none kernel (the
floor: what two kernels differ by), one cell each in turn; a cell printing 1,000,000 lines on
four such kernels, new ones each round, in a new order. Then two gateways with a pool
(`--prewarm 1`), default none and default workspace: a new kernel claimed from the pool, each
pool full before a claim. The sides take turns, and every figure counts only once what was
timed found what it should (the profile asked for, `2`, 1,000,000 stdout lines in the record,
the pool's own kernel).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.gateway_bench import BIG_CELL, KEEP_RESULTS, interleave, publish, rotated
from loomgate.gateway.residency.resident import RESIDENT_FILE
from tests.support.cells import output_texts
from tests.support.gateways import GatewayProcess, child_pids

API = "/api/loomgate/kernels"
PROFILES = ("none", "workspace", "strict")
FLOOR = "none, a second kernel"  # beside none in run_cell and the big cell: what two differ by
POOL_TIMEOUT = 120.0
# Issue 27's goals: what each comparison is held to, and the figure's limit.
GOALS = {
    "start": ("≤ +50 ms", 50.0),
    "run_cell": ("≤ 1.03×", 1.03),
    "big": ("≤ 1.03×", 1.03),
}


@dataclass
class Figures:
    """One gateway's figures by profile: start (ms), memory (MiB), run_cell (ms), big cell (s)."""

    starts: dict[str, list[float]]
    memory: dict[str, list[dict[str, float]]]
    cells: dict[str, list[float]]
    big: dict[str, list[float]]
    big_cpu: dict[str, list[float]]


def gateway_in(root: Path, name: str, default: str, prewarm: int = 0) -> GatewayProcess:
    """Return a (not started) gateway whose state and config lie in `root`/`name`, outside the
    host's /tmp (which a sandbox replaces), with `default` as its default profile."""
    config = root / name / "config"
    (config / "loomgate").mkdir(parents=True)
    (config / "loomgate" / "sandbox.toml").write_text(f'default = "{default}"\n')
    env = {"XDG_CONFIG_HOME": str(config)}
    return GatewayProcess(root / name / "state", env=env, prewarm=prewarm)


@contextlib.asynccontextmanager
async def started_gateways(
    gateways: dict[str, GatewayProcess],
) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """Start each gateway and yield a client of each, by the same names; stop them all after."""
    clients: dict[str, httpx.AsyncClient] = {}
    try:
        for name, gateway in gateways.items():
            gateway.start()
            clients[name] = httpx.AsyncClient(
                base_url=gateway.url, headers=gateway.headers, timeout=600
            )
        yield clients
    finally:
        for client in clients.values():
            await client.aclose()
        for gateway in gateways.values():
            gateway.stop()


def status_kib(pid: int, key: str) -> int:
    """Return a /proc/PID/status (or smaps_rollup) figure in KiB."""
    source = "smaps_rollup" if key == "Pss:" else "status"
    for line in Path(f"/proc/{pid}/{source}").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    raise AssertionError(f"no {key} for process {pid}")


def processes_of(gateway: GatewayProcess, kernel_id: str) -> dict[str, int]:
    """Return the pids of a kernel's processes by role: `kernel`, and for a sandboxed one
    `monitor` (bubblewrap outside, the provisioner's identity) and `init` (the sandbox's pid 1),
    each checked to be what its role says."""
    resident = json.loads((gateway.state_dir / "kernels" / kernel_id / RESIDENT_FILE).read_text())
    provisioner = resident["provisioner"]
    identity = provisioner["identity"]["pid"]
    sandbox = provisioner.get("sandbox")
    if not sandbox:
        assert b"copy_launcher.py" in Path(f"/proc/{identity}/cmdline").read_bytes()
        return {"kernel": identity}
    init = sandbox["init"]["pid"]
    [kernel] = [
        pid
        for pid in child_pids(init)
        if b"copy_launcher.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    for pid in (identity, init):
        assert Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap", pid
    return {"kernel": kernel, "monitor": identity, "init": init}


def memory_of(gateway: GatewayProcess, kernel_id: str) -> dict[str, float]:
    """Return a kernel's memory in MiB: its own RSS, and the RSS and PSS its sandbox adds."""
    pids = processes_of(gateway, kernel_id)
    rss = {role: status_kib(pid, "VmRSS:") / 1024 for role, pid in pids.items()}
    added = sum(status_kib(pid, "Pss:") for role, pid in pids.items() if role != "kernel")
    return {"monitor": 0.0, "init": 0.0, **rss, "added_pss": added / 1024}


async def started(http: httpx.AsyncClient, profile: str, cwd: Path) -> dict[str, Any]:
    """Start a kernel under `profile` working in `cwd`, return it once idle (checked)."""
    r = await http.post(API, json={"sandbox": profile, "cwd": str(cwd)})
    assert r.status_code == 201, r.text
    kernel: dict[str, Any] = r.json()["kernel"]
    while kernel["state"] != "idle":
        assert kernel["alive"], kernel
        await asyncio.sleep(0.005)
        kernel = (await http.get(f"{API}/{kernel['id']}")).json()["kernel"]
    assert kernel["sandbox"]["profile"] == profile, kernel["sandbox"]
    return kernel


def spread(values: list[float], unit: str = "ms", digits: int = 0, sign: str = "") -> str:
    """Return a median with the range (`sign` "+": differences, shown signed)."""
    lo, mid, hi = (
        f"{v:{sign}.{digits}f}" for v in (min(values), statistics.median(values), max(values))
    )
    return f"{mid} {unit} ({lo}{' to ' if sign else '–'}{hi})"


def ratios(values: list[float]) -> str:
    """Return the median ratio with the range."""
    return spread(values, "×", 3).replace(" ×", "×")


async def kernel_starts(
    gateway: GatewayProcess, http: httpx.AsyncClient, cwd: Path, rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[dict[str, float]]]]:
    """Return each profile's start times (ms) and its kernels' memory, the profiles in turn."""
    times: dict[str, list[float]] = {p: [] for p in PROFILES}
    memory: dict[str, list[dict[str, float]]] = {p: [] for p in PROFILES}
    for turn in range(rounds + 1):  # the first turn warms the page cache and is not counted
        for profile in rotated(PROFILES, turn):
            began = time.perf_counter()
            kernel = await started(http, profile, cwd)
            took = (time.perf_counter() - began) * 1000
            pids = processes_of(gateway, kernel["id"])
            if turn:
                times[profile].append(took)
                memory[profile].append(memory_of(gateway, kernel["id"]))
            r = await http.delete(f"{API}/{kernel['id']}")
            assert r.status_code == 200, r.text
            await reaped(pids.values())
    return times, memory


async def reaped(pids: Collection[int], timeout: float = 30.0) -> None:
    """Return once none of `pids` is left, zombies included, so that no start overlaps the last
    kernel's end. Polled: a process that is not ours gives no event when it is reaped (an
    orphaned sandbox init waits for the machine's pid 1)."""
    deadline = time.monotonic() + timeout
    while left(pids):
        assert time.monotonic() < deadline, f"processes {list(pids)} still there after {timeout} s"
        await asyncio.sleep(0.005)


def left(pids: Collection[int]) -> bool:
    """Return whether any of `pids` is still a process (a zombie counts)."""
    return any(Path(f"/proc/{pid}").exists() for pid in pids)


async def run_cells(
    http: httpx.AsyncClient, kernels: dict[str, str], iterations: int
) -> dict[str, list[float]]:
    """Return run_cell("1+1") latencies (ms) per kernel, one cell each in turn."""

    for kernel_id in kernels.values():
        r = await http.post(
            f"{API}/{kernel_id}/executions", json={"code": KEEP_RESULTS, "wait": 60}
        )
        assert r.json()["execution"]["state"] == "completed", r.text

    def run_on(kernel_id: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            r = await http.post(
                f"{API}/{kernel_id}/executions", json={"code": "1+1", "wait": 60, "head": 20}
            )
            execution = r.json()["execution"]
            assert execution["state"] == "completed", execution
            assert output_texts(execution) == ["2"], execution["output"]

        return run

    return await interleave({p: run_on(k) for p, k in kernels.items()}, iterations, 1)


def cell_rows(samples: dict[str, list[float]]) -> list[str]:
    """Return the run_cell table's rows: each kernel's latency, and its median over none's."""
    base = statistics.median(samples["none"])
    rows = [f"| none | {spread(samples['none'], digits=1)} | | |"]
    for side in (FLOOR, *PROFILES[1:]):
        ratio = statistics.median(samples[side]) / base
        goal = "" if side == FLOOR else verdict("run_cell", ratio)
        rows.append(f"| {side} | {spread(samples[side], digits=1)} | {ratio:.3f}× | {goal} |")
    return rows


def cpu_ms(pid: int) -> float:
    """Return the CPU time (ms) process `pid`'s live threads have run so far, to the
    nanosecond: /proc/PID/schedstat alone is its main thread's."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e6


async def big_cells(
    gateway: GatewayProcess, http: httpx.AsyncClient, cwd: Path, rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Return the 1,000,000-line cell's wall time (s) per side and the CPU time its kernel
    process spent on it: each round on new kernels (one per profile and the floor), in a new
    order, so that neither a kernel process's own speed (its memory layout, its hash seed) nor
    its place in the round is counted as its profile's."""
    sides = (*PROFILES, FLOOR)
    seconds: dict[str, list[float]] = {side: [] for side in sides}
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    shuffle = random.Random(1).shuffle
    for _ in range(rounds):
        kernels = {side: (await started(http, profile_of(side), cwd))["id"] for side in sides}
        pids = {side: processes_of(gateway, k)["kernel"] for side, k in kernels.items()}
        order = list(sides)
        shuffle(order)
        for side in order:
            cpu_before = cpu_ms(pids[side])
            began = time.perf_counter()
            r = await http.post(
                f"{API}/{kernels[side]}/executions", json={"code": BIG_CELL, "wait": 3600}
            )
            took = time.perf_counter() - began
            execution = r.json()["execution"]
            assert execution["state"] == "completed", execution
            assert execution["streams"]["stdout"]["lines"] == 1_000_000, execution["streams"]
            seconds[side].append(took)
            cpu[side].append((cpu_ms(pids[side]) - cpu_before) / 1000)
        for kernel_id in kernels.values():
            await http.delete(f"{API}/{kernel_id}")
        await reaped(pids.values())
    return seconds, cpu


def profile_of(side: str) -> str:
    """Return the profile of a side (the floor's kernel is a second none)."""
    return "none" if side == FLOOR else side


async def pooled_pid(http: httpx.AsyncClient, other_than: int | None) -> int:
    """Return the pid of the gateway's prewarmed kernel once one is ready (not `other_than`)."""
    deadline = time.monotonic() + POOL_TIMEOUT
    while time.monotonic() < deadline:
        info = (await http.get("/api/loomgate/info")).json()
        if ready := [k["pid"] for k in info["prewarmed"] if k["pid"] != other_than]:
            return int(ready[0])
        await asyncio.sleep(0.05)
    raise AssertionError("no prewarmed kernel became ready")


async def pool_claims(
    gateways: dict[str, GatewayProcess],
    clients: dict[str, httpx.AsyncClient],
    rounds: int,
    profiles: dict[str, str] | None = None,
) -> dict[str, list[float]]:
    """Return the time (ms) of a new kernel claimed from each gateway's pool, in turn, checked
    to be under its profile (`profiles`, else the gateway's name); every pool is full before
    each claim, so no kernel starts meanwhile."""
    profiles = profiles or {name: name for name in gateways}
    times: dict[str, list[float]] = {name: [] for name in gateways}
    claimed: dict[str, int | None] = dict.fromkeys(gateways)
    for turn in range(rounds + 1):  # the first turn warms up and is not counted
        for name in rotated(tuple(gateways), turn):
            ready = {n: await pooled_pid(clients[n], claimed[n]) for n in gateways}
            began = time.perf_counter()
            r = await clients[name].post(API, json={})
            took = (time.perf_counter() - began) * 1000
            assert r.status_code == 201, r.text
            kernel = r.json()["kernel"]
            assert kernel["sandbox"]["profile"] == profiles[name], kernel["sandbox"]
            pids = processes_of(gateways[name], kernel["id"]).values()
            assert ready[name] in pids, f"{name}: not the pool's kernel"
            claimed[name] = ready[name]
            if turn:
                times[name].append(took)
            await clients[name].delete(f"{API}/{kernel['id']}")
    return times


async def measure_one_gateway(root: Path, project: Path, args: argparse.Namespace) -> Figures:
    """Return the start, memory, run_cell and big-cell figures of one gateway (default none)."""
    gateway = gateway_in(root, "main", "none")
    try:
        gateway.start()
        async with httpx.AsyncClient(
            base_url=gateway.url, headers=gateway.headers, timeout=3600
        ) as http:
            starts, memory = await kernel_starts(gateway, http, project, args.rounds)
            kernels = {p: (await started(http, p, project))["id"] for p in PROFILES}
            floor = (await started(http, "none", project))["id"]
            sides = {**kernels, FLOOR: floor}
            cells = await run_cells(http, sides, args.iterations)
            for kernel_id in sides.values():
                await http.delete(f"{API}/{kernel_id}")
            big, big_cpu = await big_cells(gateway, http, project, args.big_rounds)
    finally:
        gateway.stop()
    return Figures(starts, memory, cells, big, big_cpu)


async def measure_pools(root: Path, rounds: int) -> dict[str, list[float]]:
    """Return pool claim times (ms) of a gateway with default none and one with workspace."""
    gateways = {p: gateway_in(root, f"pool-{p}", p, prewarm=1) for p in ("none", "workspace")}
    async with started_gateways(gateways) as clients:
        return await pool_claims(gateways, clients, rounds)


@contextlib.contextmanager
def bench_root(name: str) -> Iterator[tuple[Path, Path]]:
    """Yield a new root under /var/tmp (outside the host's /tmp, which a sandbox replaces) and
    its `project`, the working directory meanwhile (the gateways' own: where a pool's kernels
    work); removed afterwards."""
    root = Path("/var/tmp") / f"loomgate-{name}-{uuid.uuid4().hex[:8]}"
    project = root / "project"
    project.mkdir(parents=True)
    here = Path.cwd()
    os.chdir(project)
    try:
        yield root, project
    finally:
        os.chdir(here)
        shutil.rmtree(root, ignore_errors=True)


def load() -> str:
    """Return the machine's load averages (1, 5, 15 min)."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def verdict(goal: str, figure: float) -> str:
    """Return a goal and whether the run's `figure` met it."""
    text, limit = GOALS[goal]
    return f"{text}: {'met' if figure <= limit else 'missed'}"


def paired(samples: dict[str, list[float]], side: str) -> list[float]:
    """Return `side`'s figure over none's, round by round."""
    return [s / n for s, n in zip(samples[side], samples["none"], strict=True)]


def median_interval(values: list[float], draws: int = 2000) -> tuple[float, float]:
    """Return a 95 % bootstrap interval of the median of `values` (seeded: the same values give
    the same interval)."""
    pick = random.Random(0)
    medians = sorted(statistics.median(pick.choices(values, k=len(values))) for _ in range(draws))
    return medians[int(draws * 0.025)], medians[int(draws * 0.975) - 1]


def pool_rows(claims: dict[str, list[float]]) -> list[str]:
    """Return the pool table's rows: "no slower" holds unless the 95 % interval of the median
    ratio lies wholly above 1 (equal claims give a median above 1 every other run)."""
    turns = paired(claims, "workspace")
    low, high = median_interval(turns)
    held = "met" if low <= 1.0 else "missed"
    return [
        f"| none | {spread(claims['none'], digits=1)} | | |",
        f"| workspace | {spread(claims['workspace'], digits=1)} | {ratios(turns)}; 95 % interval "
        f"of the median {low:.3f}–{high:.3f}× | no slower than none: {held} |",
    ]


def ratio_rows(
    samples: dict[str, list[float]],
    show: Callable[[list[float]], str],
    per_turn: Callable[[dict[str, list[float]], str], list[float]],
    goal: str,
) -> list[str]:
    """Return table rows: each side's figure, and each side but none over none's in the same
    turn, with the goal (none for the floor, a second none kernel, nor for `goal` "")."""
    rows = [f"| none | {show(samples['none'])} | | |"]
    for side in samples:
        if side != "none":
            turns = per_turn(samples, side)
            held = "" if side == FLOOR or not goal else verdict(goal, statistics.median(turns))
            rows.append(f"| {side} | {show(samples[side])} | {ratios(turns)} | {held} |")
    return rows


def report(
    args: argparse.Namespace, figures: Figures, pools: dict[str, list[float]], loads: str
) -> list[str]:
    """Return the Markdown report."""
    starts, memory = figures.starts, figures.memory
    lines = [
        "# Sandboxed kernels beside unconfined ones (one run)",
        "",
        f"Load averages (1, 5, 15 min): {loads}. Medians, ranges in brackets.",
        "",
        f"## Kernel start, prewarm off ({args.rounds} rounds, the profiles in turn)",
        "",
        "| profile | POST kernels → idle | − none, same round | goal (both figures) |",
        "|---|---|---|---|",
        f"| none | {spread(starts['none'])} | | |",
    ]
    for profile in PROFILES[1:]:
        diffs = [s - n for s, n in zip(starts[profile], starts["none"], strict=True)]
        of_medians = statistics.median(starts[profile]) - statistics.median(starts["none"])
        held = max(statistics.median(diffs), of_medians)
        lines.append(
            f"| {profile} | {spread(starts[profile])} | {spread(diffs, sign='+')}; of the medians "
            f"{of_medians:+.0f} ms | {verdict('start', held)} |"
        )
    lines += [
        "",
        f"## A new kernel from the pool (`--prewarm 1`, {args.rounds} claims each, in turn)",
        "",
        "| gateway's default | POST kernels → created | / none, same round | goal |",
        "|---|---|---|---|",
        *pool_rows(pools),
        "",
        f'## run_cell("1+1") through the gateway\'s submit ({args.iterations} each, one cell '
        "each in turn)",
        "",
        "| profile | latency | / none, of the medians | goal |",
        "|---|---|---|---|",
        *cell_rows(figures.cells),
        "",
        f"## A cell printing 1,000,000 lines ({args.big_rounds} rounds, each on new kernels in a "
        "new order)",
        "",
        "| profile | wall time | / none, same round | goal |",
        "|---|---|---|---|",
        *ratio_rows(figures.big, lambda v: spread(v, "s", 2), paired, "big"),
        "",
        "The kernel process's own CPU time for the same cells (all its threads; what a sandbox",
        "could slow, without the gateway's share of the wall time):",
        "",
        "| profile | the kernel's CPU | / none, same round | |",
        "|---|---|---|---|",
        *ratio_rows(figures.big_cpu, lambda v: spread(v, "s", 2), paired, ""),
        "",
        f"## Memory of a kernel just started (RSS; {args.rounds} kernels per profile)",
        "",
        "| profile | the kernel | bubblewrap's monitor | the sandbox's init "
        "| added by the sandbox: RSS, PSS |",
        "|---|---|---|---|---|",
    ]
    for profile in PROFILES:
        values = {key: [m[key] for m in memory[profile]] for key in memory[profile][0]}
        added = [m["monitor"] + m["init"] for m in memory[profile]]
        lines.append(
            f"| {profile} | {spread(values['kernel'], 'MiB', 1)} | "
            f"{spread(values['monitor'], 'MiB', 1)} | {spread(values['init'], 'MiB', 1)} | "
            f"{spread(added, 'MiB', 1)}, {spread(values['added_pss'], 'MiB', 1)} |"
        )
    return lines


async def main() -> None:
    """Run every part and print (and optionally write) the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="kernel starts and pool claims")
    parser.add_argument("--iterations", type=int, default=2000, help='run_cell("1+1") calls')
    parser.add_argument("--big-rounds", type=int, default=3, help="1,000,000-line cells")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    out = args.out.resolve() if args.out else None
    with bench_root("sandbox-bench") as (root, project):
        before = load()
        figures = await measure_one_gateway(root, project, args)
        pools = await measure_pools(root, args.rounds)
        loads = f"{before} at the start, {load()} at the end"
    publish(report(args, figures, pools, loads), out)


if __name__ == "__main__":
    asyncio.run(main())
