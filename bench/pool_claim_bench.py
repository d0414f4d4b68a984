"""A new kernel from the pool, against the gateway of an earlier commit: "no slower than today".

Run: `uv run --frozen python -m bench.pool_claim_bench --before REV [--rounds 40] [--out F.md]`

Three gateways with a pool (`--prewarm 1`), claimed from in turn, each pool full before a
claim: this checkout's with the default profile workspace and with none, and one running the
code of commit REV (a git worktree of it on PYTHONPATH, ahead of this checkout's), default
none. Each claim is checked to be the pool's own kernel under the profile asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

import httpx

from bench.gateway_bench import publish, rounds_parser
from bench.sandbox_bench import (
    gateway_in,
    load,
    median_interval,
    pool_claims,
    ratios,
    spread,
)
from tests.support.gateways import GatewayProcess

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("shared/src", "gateway/src", "translator/src")
TODAY = "none, this checkout"


async def claims(
    gateways: dict[str, GatewayProcess], profiles: dict[str, str], rounds: int
) -> dict[str, list[float]]:
    """Return the time (ms) of a new kernel claimed from each gateway's pool, in turn."""
    async with contextlib.AsyncExitStack() as stack:
        clients = {
            name: await stack.enter_async_context(
                httpx.AsyncClient(base_url=g.url, headers=g.headers, timeout=120)
            )
            for name, g in gateways.items()
        }
        return await pool_claims(gateways, clients, rounds, profiles)


def report(before: str, rounds: int, times: dict[str, list[float]], loads: str) -> list[str]:
    """Return the Markdown report: each gateway's claims, and each over REV's in the same turn."""
    base = f"none, {before}"
    lines = [
        f"# A new kernel from the pool, against commit {before} (one run)",
        "",
        f"Load averages (1, 5, 15 min): {loads}. {rounds} claims each, in turn; medians, ranges "
        "in brackets.",
        "",
        f"| gateway | POST kernels → created | / {base}, same turn | 95 % interval of the "
        "median | no slower |",
        "|---|---|---|---|---|",
        f"| {base} | {spread(times[base], digits=1)} | | | |",
    ]
    for name in times:
        if name == base:
            continue
        turns = [t / b for t, b in zip(times[name], times[base], strict=True)]
        low, high = median_interval(turns)
        held = "met" if low <= 1.0 else "missed"
        lines.append(
            f"| {name} | {spread(times[name], digits=1)} | {ratios(turns)} | "
            f"{low:.3f}–{high:.3f}× | {held} |"
        )
    median = statistics.median
    lines += [
        "",
        f"workspace − none in this checkout, of the medians: "
        f"{median(times['workspace, this checkout']) - median(times[TODAY]):+.1f} ms.",
    ]
    return lines


def main() -> None:
    """Run the claims and print (and optionally write) the report."""
    parser = rounds_parser(__doc__, rounds=40)
    parser.add_argument("--before", required=True, help="the commit whose gateway is today's")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="loomgate-claims-"))
    worktree = root / "before"
    git = ["git", "-C", str(ROOT)]
    subprocess.run(
        [*git, "worktree", "add", "--detach", str(worktree), args.before],
        check=True,
        capture_output=True,
    )
    try:
        before = subprocess.run(
            ["git", "-C", str(worktree), "rev-parse", "--short", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        gateways = {
            f"none, {before}": gateway_in(root, "before", "none", prewarm=1),
            TODAY: gateway_in(root, "today", "none", prewarm=1),
            "workspace, this checkout": gateway_in(root, "workspace", "workspace", prewarm=1),
        }
        older = os.pathsep.join(str(worktree / source) for source in SOURCES)
        gateways[f"none, {before}"].env["PYTHONPATH"] = older
        profiles = dict(zip(gateways, ("none", "none", "workspace"), strict=True))
        loads = load()
        try:
            for gateway in gateways.values():
                gateway.start()
            times = asyncio.run(claims(gateways, profiles, args.rounds))
        finally:
            for gateway in gateways.values():
                gateway.stop()
    finally:
        subprocess.run(
            [*git, "worktree", "remove", "--force", str(worktree)], check=False, capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)
    loads = f"{loads} at the start, {load()} at the end"
    publish(report(before, args.rounds, times, loads), args.out)


if __name__ == "__main__":
    main()
