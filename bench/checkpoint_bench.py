"""Checkpoints, rollbacks and forks timed side by side with a fresh kernel's start, in one run,
through one gateway (issue 50's figures).

Run: `uv run --frozen python -m bench.checkpoint_bench [--rounds 3] [--sizes 10,1024,4096]
[--out F.md]`

Each round, for each size S (MiB, in a turn that changes every round), under the default profile
(workspace, bubblewrap): a kernel started, S MiB allocated and every page touched (checked: the
kernel's resident memory grew by S); a checkpoint taken (checked: 201, listed), the memory the
family's processes hold (PSS, summed) before and after it (the checkpoint, and at the first
one the starter, a small Python of its own); a cell that rewrites the data, then a
rollback and the first `1+1` after it (checked: `2`, and the data as it was). Beside them, in the
same round, a fresh kernel's start to its first `1+1`. A fork of a 10 MiB kernel to its first
`1+1` (in its origin's sandbox), and `1+1` in the fork beside its origin (CELLS each,
interleaved). The report names the machine's transparent huge pages mode: the kernels' malloc
asks for huge pages (residency/kernel_command.py), which "madvise" and "always" give; beside it,
`fork()` alone of a Python holding the largest size in 4 KiB pages and in huge pages (checked:
the small pages were not huge).
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from bench.gateway_bench import publish, rotated, rounds_parser
from bench.sandbox_bench import API, bench_root, gateway_in, load, spread
from tests.support.gateways import GatewayProcess, child_pids

MiB = 2**20
FILL = "data = bytearray({size})\nfor i in range(0, len(data), 4096): data[i] = 1"
CELLS = 200  # `1+1` in the fork and in its origin, each, per round


async def idle(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    """Start a kernel; return it once idle (checked)."""
    r = await http.post(API, json=body)
    assert r.status_code == 201, r.text
    kernel: dict[str, Any] = r.json()["kernel"]
    assert kernel["state"] == "idle", kernel
    return kernel


async def cell(http: httpx.AsyncClient, kernel: str, code: str, expected: str | None) -> None:
    """Run `code`; check it completed (and printed `expected`, when given)."""
    r = await http.post(f"{API}/{kernel}/executions", json={"code": code, "wait": 600, "head": 1})
    execution = r.json()["execution"]
    assert execution["state"] == "completed", execution
    if expected is not None:
        assert [line["text"] for line in execution["output"]["head"]] == [expected], execution


def pss_kb(pids: set[int]) -> int:
    """Return the PSS of `pids`, summed (kB)."""
    total = 0
    for pid in pids:
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total += next(
            int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")
        )
    return total


async def size_round(
    gateway: GatewayProcess, http: httpx.AsyncClient, size: int, figures: dict[str, list[float]]
) -> None:
    """One round of checkpoint, rollback and memory figures at `size` MiB, added to `figures`."""
    assert gateway.proc is not None
    began = time.perf_counter()
    fresh = await idle(http)
    await cell(http, fresh["id"], "1+1", None)
    figures["fresh"].append((time.perf_counter() - began) * 1000)
    await http.delete(f"{API}/{fresh['id']}")
    kernel = (await idle(http))["id"]
    try:
        await cell(http, kernel, FILL.format(size=size * MiB), None)
        before = pss_kb(child_pids(gateway.proc.pid))
        began = time.perf_counter()
        r = await http.post(f"{API}/{kernel}/checkpoints", json={"name": "cp"})
        figures["checkpoint"].append((time.perf_counter() - began) * 1000)
        assert r.status_code == 201 and r.json()["checkpoint"]["name"] == "cp", r.text
        after = pss_kb(child_pids(gateway.proc.pid))
        figures["pss"].append((after - before) / 1024)
        await cell(http, kernel, "for i in range(0, len(data), 4096): data[i] = 2", None)
        began = time.perf_counter()
        r = await http.post(f"{API}/{kernel}/rollback", json={"to": "cp"})
        await cell(http, kernel, "1+1", None)
        figures["rollback"].append((time.perf_counter() - began) * 1000)
        assert r.status_code == 200, r.text
        await cell(http, kernel, "print(data[4096], len(data))", f"1 {size * MiB}")
    finally:
        await http.delete(f"{API}/{kernel}")


async def fork_round(http: httpx.AsyncClient, figures: dict[str, list[float]]) -> None:
    """One round of fork figures (a 10 MiB kernel), added to `figures`."""
    origin = (await idle(http))["id"]
    fork: str | None = None
    try:
        await cell(http, origin, FILL.format(size=10 * MiB), None)
        began = time.perf_counter()
        fork = (await idle(http, fork=origin))["id"]
        await cell(http, fork, "1+1", None)
        figures["fork"].append((time.perf_counter() - began) * 1000)
        times: dict[str, list[float]] = {origin: [], fork: []}
        for turn in range(CELLS):
            for kernel in rotated((origin, fork), turn):
                began = time.perf_counter()
                await cell(http, kernel, "print(1+1)", "2")
                times[kernel].append((time.perf_counter() - began) * 1000)
        figures["fork_cell"].append(
            statistics.median(times[fork]) / statistics.median(times[origin])
        )
    finally:
        for kernel in (origin, fork):
            if kernel is not None:
                await http.delete(f"{API}/{kernel}")


# fork() alone, in a Python of its own holding `size` bytes touched, in 4 KiB pages or asking
# for huge pages (madvise): what the kernels' malloc setting changes (residency/kernel_command.py).
FORK_ALONE = """
import mmap, os, sys, time
size, advice = int(sys.argv[1]), getattr(mmap, sys.argv[2])
memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
memory.madvise(advice)
for i in range(0, size, 4096):
    memory[i] = 1
times = []
for _ in range(5):
    began = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    times.append((time.perf_counter() - began) * 1000)
    os.waitpid(pid, 0)
huge = [line for line in open("/proc/self/smaps_rollup") if line.startswith("AnonHugePages")]
print(min(times), int(huge[0].split()[1]) * 1024 if huge else 0)
"""


def fork_alone(size: int, advice: str) -> tuple[float, int]:
    """Return the fastest of five fork()s of a Python holding `size` MiB touched under `advice`
    (MADV_HUGEPAGE or MADV_NOHUGEPAGE), in ms, and the bytes it held in huge pages."""
    done = subprocess.run(
        [sys.executable, "-c", FORK_ALONE, str(size * MiB), advice],
        capture_output=True,
        text=True,
        check=True,
    )
    took, huge = done.stdout.split()
    return float(took), int(huge)


def huge_pages_mode() -> str:
    """Return the system's transparent huge pages mode (the bracketed word), or "unknown"."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "unknown"
    return text[text.find("[") + 1 : text.find("]")] if "[" in text else text.strip()


def report(
    sizes: list[int],
    figures: dict[int, dict[str, list[float]]],
    forks: dict[str, list[float]],
    rounds: int,
    loads: str,
    alone_size: int,
    alone: dict[str, tuple[float, int]],
) -> list[str]:
    """Return the Markdown report."""
    lines = [
        "# Checkpoints, rollbacks and forks, beside a fresh kernel",
        "",
        f"Run on {time.strftime('%Y-%m-%d')}. "
        f"Default profile (workspace, bubblewrap) unless said. Load averages (1, 5, 15 min): "
        f"{loads}. {rounds} rounds; medians, ranges in brackets. Transparent huge pages: "
        f"{huge_pages_mode()}.",
        "",
        "| kernel holding | checkpoint | rollback → first `1+1` | fresh kernel → first `1+1` "
        "| PSS a checkpoint adds |",
        "|---|---|---|---|---|",
    ]
    for size in sizes:
        f = figures[size]
        label = f"{size} MiB" if size < 1024 else f"{size // 1024} GiB"
        lines.append(
            f"| {label} | {spread(f['checkpoint'], 'ms', 1)} | {spread(f['rollback'], 'ms')} | "
            f"{spread(f['fresh'], 'ms')} | {spread(f['pss'], 'MiB', 1)}, "
            f"{statistics.median(f['pss']) / size * 100:.1f} % of the kernel's data |"
        )
    lines += [
        "",
        f"Fork (10 MiB): fork → first `1+1` {spread(forks['fork'], 'ms')}; "
        f"`1+1` in the fork / in its origin, median of {CELLS} each: "
        f"{spread(forks['fork_cell'], '×', 3)}.",
        "",
        f"`fork()` alone of a Python holding {alone_size // 1024} GiB, every page touched, fastest "
        f"of five: in 4 KiB pages {alone['MADV_NOHUGEPAGE'][0]:.1f} ms; asking for huge pages "
        f"{alone['MADV_HUGEPAGE'][0]:.1f} ms ({alone['MADV_HUGEPAGE'][1] / MiB:.0f} MiB of it in "
        "huge pages).",
    ]
    return lines


async def main() -> None:
    """Start the gateway, run the rounds, print (and write) the report."""
    parser = rounds_parser(__doc__, rounds=3)
    parser.add_argument("--sizes", default="10,1024,4096")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    keys = ("checkpoint", "rollback", "fresh", "pss")
    figures = {size: {key: list[float]() for key in keys} for size in sizes}
    forks: dict[str, list[float]] = {"fork": [], "fork_cell": []}
    with bench_root("checkpoints") as (root, _project):
        gateway = gateway_in(root, "gateway", "workspace")
        try:
            before = load()
            gateway.start()
            async with httpx.AsyncClient(
                base_url=gateway.url, headers=gateway.headers, timeout=600
            ) as http:
                for turn in range(args.rounds + 1):  # the first warms the page cache, uncounted
                    for size in rotated(tuple(sizes), turn):
                        kept = figures[size] if turn else {key: [] for key in keys}
                        await size_round(gateway, http, size, kept)
                    await fork_round(http, forks if turn else {"fork": [], "fork_cell": []})
            loads = f"{before} at the start, {load()} at the end"
        finally:
            gateway.stop()
    largest = max(sizes)
    alone = {advice: fork_alone(largest, advice) for advice in ("MADV_NOHUGEPAGE", "MADV_HUGEPAGE")}
    assert alone["MADV_NOHUGEPAGE"][1] == 0, "pages asked to be small were huge"
    publish(report(sizes, figures, forks, args.rounds, loads, largest, alone), args.out)


if __name__ == "__main__":
    asyncio.run(main())
