"""Live cells benchmark: the latency of the agent's `run_cell` on the kernel of a notebook open
in JupyterLab, with live cells on and off, side by side in one run.

Run: `uv run --frozen python -m bench.live_cells_bench [--cells 100] [--out FILE]`

Two real JupyterLabs with jupyter-collaboration and loomgate's extension, one enabled with
`loomgate jupyter enable`, the other with `--no-live-cells`; in each a notebook session and a Y
client joined to the notebook's room (a second browser). One `loomgate-mcp` per lab runs
`--cells` cells through `run_cell`, the two labs alternating cell by cell so that both meet the
same machine. Before the figures are printed, each run is checked: every reply has its
`Out[N]`; the live notebook has every cell, tagged and numbered, with its output; the other
notebook has none of them.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client

from tests.gateway.test_live_cells import NOTEBOOK, agent, agent_cells, write_notebook
from tests.support import jupyter_lab
from tests.support.collaboration import NotebookPeer, joined
from tests.support.jupyter_lab import JupyterServerProcess, loomgate_cli
from tests.support.mcp_clients import text

WARMUP = 5
START_TIMEOUT = 180.0  # a JupyterLab's start on a loaded machine


async def run_cell(mcp: Client, code: str) -> tuple[float, str]:
    """Return the seconds `run_cell` took, and its text."""
    start = time.perf_counter()
    result = await mcp.call_tool("run_cell", {"code": code})
    return time.perf_counter() - start, text(result)


async def measure(cells: int, home: Path) -> dict[str, list[float]]:
    """Return the run_cell times with live cells on and off, after checking what they did."""
    labs = {"on": JupyterServerProcess(home / "on"), "off": JupyterServerProcess(home / "off")}
    off = loomgate_cli(labs["off"].env, "jupyter", "enable", "--no-live-cells")
    assert off.returncode == 0, off.stderr
    times: dict[str, list[float]] = {"on": [], "off": []}
    try:
        for lab in labs.values():
            lab.start()
            write_notebook(lab)
            lab.open_notebook(NOTEBOOK)
        async with AsyncExitStack() as stack:
            peers: dict[str, NotebookPeer] = {}
            clients: dict[str, Client] = {}
            for key, lab in labs.items():
                peers[key] = await stack.enter_async_context(joined(lab, NOTEBOOK))
                clients[key] = await stack.enter_async_context(agent(lab, home / key))
                await clients[key].call_tool("connect", {"kernel": "analysis.ipynb"})
            for i in range(WARMUP + cells):
                for key in ("on", "off") if i % 2 else ("off", "on"):
                    elapsed, reply = await run_cell(clients[key], f"x = {i}\nx * 2")
                    assert reply.endswith(f"Out[{i + 1}]: {i * 2}"), reply
                    if i >= WARMUP:
                        times[key].append(elapsed)
            total = WARMUP + cells
            shown = await peers["on"].wait_for(
                lambda c: (
                    len(agent_cells(c)) == total
                    and agent_cells(c)[-1]["metadata"]["loomgate"]["state"] == "completed"
                ),
                "every cell",
            )
            check_live(agent_cells(shown), total)
            assert agent_cells(peers["off"].cells()) == [], "live cells off wrote a cell"
    finally:
        for lab in labs.values():
            lab.stop()
    return times


def check_live(cells: list[dict[str, Any]], total: int) -> None:
    """Check that the live notebook holds every cell, numbered, with its result."""
    assert [c["execution_count"] for c in cells] == list(range(1, total + 1))
    for i, cell in enumerate(cells):
        assert cell["source"] == f"x = {i}\nx * 2"
        assert [o["data"]["text/plain"] for o in cell["outputs"]] == [str(i * 2)]


def report(times: dict[str, list[float]], cells: int) -> str:
    """Return the figures as a markdown table."""
    rows = ["| live cells | median ms | p90 ms | min ms |", "|---|---|---|---|"]
    for key in ("off", "on"):
        values = sorted(times[key])
        p90 = values[int(0.9 * (len(values) - 1))]
        rows.append(
            f"| {key} | {statistics.median(values) * 1000:.1f} | {p90 * 1000:.1f} | "
            f"{values[0] * 1000:.1f} |"
        )
    ratio = statistics.median(times["on"]) / statistics.median(times["off"])
    rows.append("")
    rows.append(
        f"{cells} `run_cell` calls each, alternating; on / off (medians): {ratio:.3f}x "
        "(goal <= 1.05x)."
    )
    return "\n".join(rows)


def main() -> None:
    """Run the benchmark and print (or write) its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    jupyter_lab.START_TIMEOUT = START_TIMEOUT
    with tempfile.TemporaryDirectory(prefix="live-cells-bench-") as home:
        times = asyncio.run(measure(args.cells, Path(home)))
    table = report(times, args.cells)
    print(table)
    if args.out:
        args.out.write_text(f"# Live cells: run_cell latency, on vs off\n\n{table}\n")


if __name__ == "__main__":
    main()
