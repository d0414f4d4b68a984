"""Notebook benchmark: run_cell("1+1") in the kernel of a notebook open in JupyterLab.

Run: `uv run python -m bench.notebook_bench [--iterations 300] [--rounds 3] [--out FILE.md]`

A real `jupyter lab` with loomgate's extension enabled (`loomgate jupyter enable`), a notebook
session made as JupyterLab makes it, and, interleaved in blocks against that one kernel:
- ws: the kernel websocket (v1 protocol) JupyterLab itself uses, the floor;
- noop: the MCP SDK's client → a no-op MCP server over stdio (the SDK's own cost). The
  websocket and the no-op tool together cross the same processes as run_cell (a client, an MCP
  server, the Jupyter server, the kernel): their sum is the floor of any MCP server that reaches
  the kernel through Jupyter Server;
- minimal: the same client → a minimal MCP server (`noop_mcp_server.py --websocket`) whose tool
  runs the cell over the kernel's websocket and keeps nothing: what an MCP server that reaches
  the kernel through Jupyter Server costs at the least, measured whole (the sum above leaves out
  what chaining the processes costs: each waits, idle, for the next). Its websocket is
  connected only in its own blocks (after each turn of the others), and its paced calls come
  after theirs, so its frames never tax the other paths;
- mcp: the same client → `loomgate-mcp --gateway jupyter:PORT --kernel analysis.ipynb` → the
  extension's endpoints → the kernel.
Also paced (0.2 s of idleness before each call, an agent's pace). Each round is a new lab.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from mcp import Client, StdioServerParameters

from bench.gateway_bench import interleave, publish, spread, timed
from bench.translator_bench import BLOCK, NOOP, PACED_ROUNDS, apart
from loomgate.translator.mcp_server.settings import Settings
from tests.support.jupyter_lab import JupyterServerProcess
from tests.support.kernel_ws import KernelWebsocket
from tests.support.translators import TRANSLATOR

NOTEBOOK = "analysis.ipynb"
ROOT = Path(__file__).resolve().parent.parent


def minimal_server(lab: JupyterServerProcess, kernel_id: str) -> StdioServerParameters:
    """Return the minimal MCP server that runs each cell over the kernel's websocket."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "bench.noop_mcp_server", "--websocket", lab.url, kernel_id],
        env={**os.environ, "NOOP_WEBSOCKET_TOKEN": lab.token},
        cwd=str(ROOT),
    )


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
            Client(minimal_server(lab, kernel_id)) as minimal,
        ):

            async def websocket() -> None:
                reply, _ = await ws.run("1+1")
                assert reply["content"]["status"] == "ok", reply

            async def run_cell() -> None:
                result = await mcp.call_tool("run_cell", {"code": "1+1"})
                assert not result.is_error and result.structured_content["state"] == "completed"

            async def noop_call() -> None:
                await noop.call_tool("run_cell", {"code": "1+1"})

            async def minimal_call() -> None:
                result = await minimal.call_tool("run_cell", {"code": "1+1"})
                assert result.content[0].text == "ok", result  # type: ignore[union-attr]

            @contextlib.asynccontextmanager
            async def minimal_connected() -> AsyncIterator[None]:
                """Connect the minimal server's websocket for one phase (warmed up), then close
                it: its frames would otherwise tax the other paths."""
                for _ in range(5):
                    await minimal_call()
                try:
                    yield
                finally:
                    await minimal.call_tool("hang_up", {})

            runs = {"ws": websocket, "noop": noop_call, "mcp": run_cell}
            loop = await interleave(runs, 0)  # warms each up
            loop["minimal"] = []
            for _ in range(iterations // BLOCK):
                for name, fn in runs.items():
                    loop[name] += [await timed(fn) for _ in range(BLOCK)]
                async with minimal_connected():
                    loop["minimal"] += [await timed(minimal_call) for _ in range(BLOCK)]
            paced = await apart(runs, PACED_ROUNDS)
            async with minimal_connected():
                paced |= await apart({"minimal": minimal_call}, PACED_ROUNDS)
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
        "minimal": "a minimal MCP server running the cell over the websocket, keeping nothing",
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
    beyond = [(r["mcp"][0] - r["minimal"][0], r["mcp"][1] - r["minimal"][1]) for r in results]
    lines += [
        "",
        f"loomgate above that floor (run_cell − websocket − no-op): "
        f"{spread([a[0] for a in above])} ms in a loop, {spread([a[1] for a in above])} ms paced.",
        f"loomgate above the minimal MCP server (run_cell − minimal): "
        f"{spread([b[0] for b in beyond])} ms in a loop, {spread([b[1] for b in beyond])} ms "
        "paced.",
    ]
    publish(lines, args.out)


if __name__ == "__main__":
    asyncio.run(main())
