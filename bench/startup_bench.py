"""Start-up benchmark: each row of issue 16's table beside the floor it is measured against.

Run: `uv run python -m bench.startup_bench [--rounds 3] [--out bench/results/startup.md]`

Every round measures each row and its floor one after the other, so machine noise hits both;
the table gives the median and range over the rounds:
- gateway spawn → serving: `loomgate-gateway` beside a stock `jupyter server` and a bare
  `python -c pass`;
- `loomgate run "1+1"` with no gateway running (it starts the gateway and a kernel) beside a
  kernel alone, started and answering kernel_info (jupyter_client, no server);
- `loomgate run "1+1"` with gateway and kernel up, beside `python -c pass` and the CLI's import;
- spawn `loomgate-mcp` → first run_cell result: a new conversation kernel, and attached to a
  running kernel, beside a no-op MCP server's spawn → first result;
- spawn `loomgate-mcp` with no gateway running → first result, beside loommux 0.1.8 (installed
  here into a temporary venv by uv) spawn → first run_python result, the same SDK client.
Port 8787 (the local gateway's default) must be free: the autostart rows use it. Every side
runs with Python's bytecode cache, as installed packages do (`bench/installed.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from mcp import Client, StdioServerParameters

from bench.gateway_bench import publish, raw_kernel, stock_server
from bench.installed import as_installed
from bench.translator_bench import LOOMMUX, NOOP, install_loommux
from loomgate.shared.paths import GATEWAY_FILE, read_gateway_file
from loomgate.translator.client.local_gateway import gateway_command
from tests.support.gateways import free_port, stop_local_gateway
from tests.support.translators import TRANSLATOR

POLL = 0.01


def loomgate_cli(*args: str) -> list[str]:
    """Return the command line of `loomgate *args` (its state dir comes from the environment)."""
    return [sys.executable, "-m", "loomgate.translator.cli", *args]


def environment(state: Path) -> dict[str, str]:
    """Return the environment the CLI and translators get: a state dir of their own."""
    return {**os.environ, "LOOMGATE_STATE_DIR": str(state)}


def run_seconds(command: list[str], env: dict[str, str] | None = None) -> float:
    """Return the wall time of running `command` to its end (it must succeed)."""
    began = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - began
    assert done.returncode == 0, (command, done.stdout, done.stderr)
    return elapsed


async def until_serving(
    process: subprocess.Popen[bytes], began: float, where: Callable[[], tuple[str, str] | None]
) -> float:
    """Return seconds from `began` until the server `process` answers /api/kernels; `where`
    returns its URL and token once they are known."""
    async with httpx.AsyncClient(timeout=5) as http:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
            known = where()
            if known is not None:
                url, token = known
                try:
                    headers = {"Authorization": f"token {token}"}
                    if (await http.get(f"{url}/api/kernels", headers=headers)).status_code == 200:
                        return time.perf_counter() - began
                except httpx.HTTPError:
                    pass
            await asyncio.sleep(POLL)


def spawned(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Return a started server process, its output discarded."""
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stopped(process: subprocess.Popen[bytes]) -> None:
    """End a server this bench started (no kernels run in it)."""
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def gateway_start(work: Path) -> dict[str, float]:
    """Return spawn → serving of loomgate-gateway and of a stock jupyter server, and bare Python."""
    state = work / f"gateway-{time.monotonic_ns()}"
    state.mkdir()
    port = free_port()

    def where() -> tuple[str, str] | None:
        if not (state / GATEWAY_FILE).exists():
            return None
        info = read_gateway_file(state)
        return None if info is None else (info["url"], info["token"])

    began = time.perf_counter()
    command = gateway_command(port=port, state_dir=state)
    process = spawned(command, environment(state))
    try:
        loomgate = await until_serving(process, began, where)
    finally:
        stopped(process)
    stock_port, token = free_port(), "bench"
    began = time.perf_counter()
    stock = stock_server(stock_port, token, work)
    try:
        stock_seconds = await until_serving(
            stock, began, lambda: (f"http://127.0.0.1:{stock_port}", token)
        )
    finally:
        stopped(stock)
    bare = run_seconds([sys.executable, "-c", "pass"])
    return {"gateway": loomgate, "stock": stock_seconds, "bare": bare}


async def kernel_alone() -> float:
    """Return seconds to start a kernel with jupyter_client and have it answer kernel_info."""
    began = time.perf_counter()
    async with raw_kernel():
        return time.perf_counter() - began


async def cli_rows(work: Path) -> dict[str, float]:
    """Return `loomgate run "1+1"` cold (no gateway) and warm, and their floors."""
    state = work / f"cli-{time.monotonic_ns()}"
    env = environment(state)
    floor = await kernel_alone()
    try:
        cold = run_seconds(loomgate_cli("run", "1+1"), env)
        run_seconds(loomgate_cli("run", "1+1"), env)  # warm the kernel's first cells
        warm = statistics.median(run_seconds(loomgate_cli("run", "1+1"), env) for _ in range(5))
    finally:
        stop_local_gateway(state)
    bare = statistics.median(run_seconds([sys.executable, "-c", "pass"]) for _ in range(5))
    imports = statistics.median(
        run_seconds([sys.executable, "-c", "import loomgate.translator.cli.main"]) for _ in range(5)
    )
    return {"cold": cold, "kernel": floor, "warm": warm, "python": bare, "import": imports}


async def first_result(
    params: StdioServerParameters, tool: str, arguments: dict[str, str]
) -> float:
    """Return seconds from spawning an MCP server to its first result of `tool`."""
    began = time.perf_counter()
    async with Client(params) as mcp:
        result = await mcp.call_tool(tool, arguments)
        elapsed = time.perf_counter() - began
        assert not result.is_error, result
    return elapsed


def translator_params(state: Path, *args: str) -> StdioServerParameters:
    """Return how a host spawns `loomgate-mcp` for the local gateway kept in `state`."""
    return StdioServerParameters(
        command=TRANSLATOR[0],
        args=[*TRANSLATOR[1:], *args],
        env=environment(state),
        cwd=str(state.parent),
    )


async def translator_rows(work: Path, loommux: Path) -> dict[str, float]:
    """Return spawn → first result: autostart, new conversation kernel, attached; and floors."""
    state = work / f"mcp-{time.monotonic_ns()}"
    run_cell = {"code": "1+1"}
    try:
        autostart = await first_result(translator_params(state), "run_cell", run_cell)
        fresh = await first_result(translator_params(state), "run_cell", run_cell)
        run_seconds(loomgate_cli("run", "--kernel", "bench-attached", "1+1"), environment(state))
        attached = await first_result(
            translator_params(state, "--kernel", "bench-attached"), "run_cell", run_cell
        )
    finally:
        stop_local_gateway(state)
    noop = await first_result(NOOP, "run_cell", run_cell)
    params = StdioServerParameters(command=str(loommux), args=[], cwd=str(work))
    rival = await first_result(params, "run_python", {"freeform": "1+1"})
    return {
        "autostart": autostart,
        "fresh": fresh,
        "attached": attached,
        "noop": noop,
        "loommux": rival,
    }


def row(samples: dict[str, list[float]], measure: str, key: str, floor: str, base: str) -> str:
    """Return a table row: the measure, its floor (named once, blank when repeated) and the
    per-round difference."""
    values, floors = samples[key], samples[base]
    named = f"{floor} {spread(floors)}" if floor else ""
    gaps = [value - low for value, low in zip(values, floors, strict=True)]
    return f"| {measure} | {spread(values)} | {named} | {spread(gaps)} |"


def spread(values: list[float]) -> str:
    """Return `median s (low–high)`."""
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


def ratio(values: list[float], floors: list[float]) -> str:
    """Return the median of the per-round ratios, with their range."""
    ratios = [value / floor for value, floor in zip(values, floors, strict=True)]
    return f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="loomgate-startup-") as tmp:
        work = Path(tmp)
        loommux = install_loommux(work)
        as_installed(loommux.parent.parent / "lib")
        await translator_rows(work, loommux)  # not counted: fills the OS's file cache for both
        for _ in range(args.rounds):
            for rows in (
                await gateway_start(work),
                await cli_rows(work),
                await translator_rows(work, loommux),
            ):
                for key, value in rows.items():
                    samples.setdefault(key, []).append(value)
    lines = [
        f"## Start-up, {args.rounds} rounds (median and range)",
        "",
        "| measure | value | floor, same rounds | value − floor |",
        "|---|---|---|---|",
        row(samples, "gateway spawn → serving", "gateway", "bare `python -c pass`", "bare"),
        row(samples, "… a stock `jupyter server`, for reference", "stock", "", "bare"),
        row(samples, "`loomgate run 1+1`, no gateway running", "cold", "a kernel alone", "kernel"),
        row(
            samples,
            "`loomgate run 1+1`, all up (median of 5)",
            "warm",
            "`python -c pass`",
            "python",
        ),
        row(samples, "… the CLI's imports alone", "import", "", "python"),
        row(samples, "spawn `loomgate-mcp` → result, new kernel", "fresh", "no-op server", "noop"),
        row(samples, "… attached to a running kernel", "attached", "", "noop"),
        row(samples, "… no gateway running", "autostart", f"{LOOMMUX}", "loommux"),
        "",
        f"No gateway running, loomgate-mcp vs {LOOMMUX}: "
        f"{ratio(samples['autostart'], samples['loommux'])} (≤ 1.00× is faster).",
    ]
    publish(lines, args.out)


if __name__ == "__main__":
    asyncio.run(main())
