"""Kernel start benchmark: the gateway's channels trying a refused connect again after
RECONNECT_INTERVAL_MS, beside a gateway whose channels wait ZMQ's default 100 ms, in one run.

Run: `uv run --frozen python -m bench.kernel_start_bench [--rounds 20] [--out F.md]`

Two gateways (default profile none, prewarm off), the second started with the interval set
back to ZMQ's default; each round starts one kernel per gateway and profile (none, workspace),
the four in a turn that changes every round, each once the last kernel's processes are gone
(POST kernels → idle, the profile checked). Reported: each side's start, the same-round
difference of the two gateways, and on each gateway what workspace adds to none.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

import httpx

from bench.gateway_bench import publish, rotated, rounds_parser
from bench.sandbox_bench import API, gateway_in, load, processes_of, reaped, spread, started
from tests.support.gateways import GatewayProcess

PROFILES = ("none", "workspace")
ZMQ_DEFAULT_MS = 100

# The second gateway's launcher (`python -c AT_ZMQ_DEFAULT`, then the gateway's own command):
# the module's interval set back, then the gateway run as `python -m loomgate.gateway` runs it.
AT_ZMQ_DEFAULT = (
    "import runpy, sys\n"
    "assert sys.argv[1:4] == [sys.executable, '-m', 'loomgate.gateway'], sys.argv\n"
    "import loomgate.gateway.kernels.zmq_channels as channels\n"
    f"channels.RECONNECT_INTERVAL_MS = {ZMQ_DEFAULT_MS}\n"
    "print(f'{channels.RECONNECT_INTERVAL_MS=}', file=sys.stderr, flush=True)\n"
    "sys.argv = sys.argv[:1] + sys.argv[4:]\n"
    "runpy.run_module('loomgate.gateway', run_name='__main__', alter_sys=True)\n"
)


def default_interval_gateway(root: Path) -> GatewayProcess:
    """Return a (not started) gateway like `gateway_in(root, 'zmq-default', 'none')`, whose
    channels wait ZMQ's default interval before trying a connect again."""
    gateway = gateway_in(root, "zmq-default", "none")
    gateway.launcher = [sys.executable, "-c", AT_ZMQ_DEFAULT]
    return gateway


async def starts(
    gateways: dict[str, GatewayProcess], cwd: Path, rounds: int
) -> dict[str, list[float]]:
    """Return the start times (ms) of each gateway's kernels by `side/profile`, in turns."""
    sides = tuple(f"{name}/{profile}" for name in gateways for profile in PROFILES)
    times: dict[str, list[float]] = {side: [] for side in sides}
    clients = {
        name: httpx.AsyncClient(base_url=g.url, headers=g.headers, timeout=120)
        for name, g in gateways.items()
    }
    try:
        for turn in range(rounds + 1):  # the first turn warms the page cache and is not counted
            for side in rotated(sides, turn):
                name, profile = side.split("/")
                began = time.perf_counter()
                kernel = await started(clients[name], profile, cwd)
                took = (time.perf_counter() - began) * 1000
                pids = processes_of(gateways[name], kernel["id"])
                r = await clients[name].delete(f"{API}/{kernel['id']}")
                assert r.status_code == 200, r.text
                await reaped(pids.values())
                if turn:
                    times[side].append(took)
    finally:
        for client in clients.values():
            await client.aclose()
    return times


def report(times: dict[str, list[float]], rounds: int, loads: str) -> list[str]:
    """Return the Markdown report."""
    lines = [
        "# Kernel start: channels trying a connect again soon, beside ZMQ's default",
        "",
        f"Load averages (1, 5, 15 min): {loads}. Medians, ranges in brackets.",
        "",
        f"## POST kernels → idle ({rounds} rounds, the four sides in turn)",
        "",
        "| profile | ZMQ's default (100 ms) | the gateway's | − the default, same round |",
        "|---|---|---|---|",
    ]
    for profile in PROFILES:
        ours, default = times[f"ours/{profile}"], times[f"default/{profile}"]
        diffs = [a - b for a, b in zip(ours, default, strict=True)]
        lines.append(
            f"| {profile} | {spread(default)} | {spread(ours)} | {spread(diffs, sign='+')} |"
        )
    lines += ["", "| gateway | workspace − none, same round | of the medians |", "|---|---|---|"]
    for name, label in (("default", "ZMQ's default"), ("ours", "the gateway's")):
        workspace, none = times[f"{name}/workspace"], times[f"{name}/none"]
        diffs = [a - b for a, b in zip(workspace, none, strict=True)]
        of_medians = statistics.median(workspace) - statistics.median(none)
        lines.append(f"| {label} | {spread(diffs, sign='+')} | {of_medians:+.0f} ms |")
    return lines


async def main() -> None:
    """Start both gateways, time their kernels' starts and print (and write) the report."""
    parser = rounds_parser(__doc__, rounds=20)
    args = parser.parse_args()
    root = Path("/var/tmp") / f"loomgate-start-bench-{uuid.uuid4().hex[:8]}"
    project = root / "project"
    project.mkdir(parents=True)
    gateways = {"ours": gateway_in(root, "ours", "none"), "default": default_interval_gateway(root)}
    try:
        before = load()
        for gateway in gateways.values():
            gateway.start()
        log = gateways["default"].state_dir.parent / "state.stderr"
        said = f"channels.RECONNECT_INTERVAL_MS={ZMQ_DEFAULT_MS}"
        assert said in log.read_text(), f"the second gateway's interval was not set: {log}"
        times = await starts(gateways, project, args.rounds)
        loads = f"{before} at the start, {load()} at the end"
    finally:
        for gateway in gateways.values():
            gateway.stop()
        shutil.rmtree(root, ignore_errors=True)
    publish(report(times, args.rounds, loads), args.out)


if __name__ == "__main__":
    asyncio.run(main())
