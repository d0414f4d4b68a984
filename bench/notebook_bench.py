"""Notebook benchmark: run_cell("1+1") in the kernel of a notebook open in JupyterLab.

Run: `uv run python -m bench.notebook_bench [--iterations 300] [--rounds 3] [--out FILE.md]`

A real `jupyter lab` with loomgate's extension enabled (`loomgate jupyter enable`), a notebook
session made as JupyterLab makes it, and, interleaved in blocks against that one kernel:
- ws: the kernel websocket (v1 protocol) JupyterLab itself uses, the floor;
- noop: the MCP SDK's client → a no-op MCP server over stdio (the SDK's own cost). The
  websocket and the no-op tool together cross the same processes as run_cell (a client, an MCP
  server, the Jupyter server, the kernel): their sum is the floor of any MCP server that reaches
  the kernel through Jupyter Server;
- mcp: the same client → `loomgate-mcp --gateway jupyter:PORT --kernel analysis.ipynb` → the
  extension's endpoints → the kernel.
Also paced (0.2 s of idleness before each call, an agent's pace). Each round is a new lab.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

from mcp import Client, StdioServerParameters

from bench.gateway_bench import interleave, publish, spread
from bench.translator_bench import BLOCK, NOOP, PACED_ROUNDS, apart
from loomgate.translator.mcp_server.settings import Settings
from tests.support.jupyter_lab import JupyterServerProcess
from tests.support.kernel_ws import KernelWebsocket
from tests.support.translators import TRANSLATOR

NOTEBOOK = "analysis.ipynb"


async def one_round(home: Path, iterations: int) -> dict[str, tuple[float, float]]:
    """Return each path's (loop, paced) median in ms, in a new JupyterLab."""
    lab = JupyterServerProcess(home)
    lab.start()
    try:
        kernel_id = lab.open_notebook(NOTEBOOK)["kernel"]["id"]
        settings = Settings(gateway=f"jupyter:{lab.port}", kernel=NOTEBOOK, autostart=False)
        translator = StdioServerParameters(
            command=TRANSLATOR[0], args=[*TRANSLATOR[1:], *settings.argv()], env=lab.env
        )
        async with (
            KernelWebsocket(lab.url, lab.token, kernel_id, binary=True) as ws,
            Client(translator) as mcp,
            Client(NOOP) as noop,
        ):

            async def websocket() -> None:
                reply, _ = await ws.run("1+1")
                assert reply["content"]["status"] == "ok", reply

            async def run_cell() -> None:
                result = await mcp.call_tool("run_cell", {"code": "1+1"})
                assert not result.is_error and result.structured_content["state"] == "completed"

            async def noop_call() -> None:
                await noop.call_tool("run_cell", {"code": "1+1"})

            runs = {"ws": websocket, "noop": noop_call, "mcp": run_cell}
            loop = await interleave(runs, iterations, BLOCK)
            paced = await apart(runs, PACED_ROUNDS)
    finally:
        lab.stop()
    medians = {
        name: (statistics.median(loop[name]), statistics.median(paced[name])) for name in loop
    }
    medians["floor"] = (
        medians["ws"][0] + medians["noop"][0],
        medians["ws"][1] + medians["noop"][1],
    )
    return medians


async def main() -> None:
    """Run the rounds and print (and write) the report."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="loomgate-notebook-bench-") as work:
        for index in range(args.rounds):
            results.append(await one_round(Path(work) / f"round-{index}", args.iterations))
    lines = [
        "## run_cell in a JupyterLab notebook's kernel (loomgate extension)",
        "",
        f"`uv run python -m bench.notebook_bench`: {args.rounds} rounds, each a new JupyterLab; "
        f"{args.iterations} calls per path interleaved in blocks of {BLOCK}, then "
        f"{PACED_ROUNDS} calls 0.2 s apart; medians in ms, median (range) over the rounds. "
        f"Python {sys.version.split()[0]}.",
        "",
        "| path | loop, ms | × websocket | paced, ms | × websocket |",
        "|---|---|---|---|---|",
    ]
    labels = {
        "ws": "floor: the notebook's kernel websocket (what JupyterLab uses)",
        "noop": "the MCP SDK alone: a no-op tool over stdio",
        "floor": "floor of an MCP server reaching the kernel through Jupyter: websocket + no-op",
        "mcp": "run_cell over stdio: MCP client → loomgate-mcp → the extension → kernel",
    }
    for name, label in labels.items():
        loop = [r[name][0] for r in results]
        paced = [r[name][1] for r in results]
        ratio_loop = [r[name][0] / r["ws"][0] for r in results]
        ratio_paced = [r[name][1] / r["ws"][1] for r in results]
        lines.append(
            f"| {label} | {spread(loop)} | {spread(ratio_loop)}× | {spread(paced)} | "
            f"{spread(ratio_paced)}× |"
        )
    above = [(r["mcp"][0] - r["floor"][0], r["mcp"][1] - r["floor"][1]) for r in results]
    lines += [
        "",
        f"loomgate above that floor (run_cell − websocket − no-op): "
        f"{spread([a[0] for a in above])} ms in a loop, {spread([a[1] for a in above])} ms paced.",
    ]
    publish(lines, args.out)


if __name__ == "__main__":
    asyncio.run(main())
