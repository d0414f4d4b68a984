"""How far one run_cell travels through loomgate's own code: files entered, calls between files.

Run: `uv run python -m bench.run_cell_walk [--json]`

A gateway is started with a profiler hook (this file, run as its launcher), and the translator
runs in this process behind the MCP SDK's in-memory client. After a warm-up cell, one
`run_cell("1+1")` is traced on both sides: every call from a function in one loomgate source
file to a function in another is an edge (caller file:function → callee file:function), counted
once. Calls made by asyncio's loop or a library are not edges; the walk is loomgate's own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import runpy
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

MARK = f"{os.sep}loomgate{os.sep}"
Edge = tuple[str, str]


def short(path: str) -> str:
    """Return a source path from its package folder on (gateway/…, translator/…, shared/…)."""
    return path.split(MARK, 1)[1] if MARK in path else path


class Tracer:
    """Collects the cross-file calls within loomgate while it is on."""

    def __init__(self) -> None:
        self.on = False
        self.edges: set[Edge] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on or event != "call":
            return
        callee = frame.f_code.co_filename
        caller_frame = frame.f_back
        if caller_frame is None or MARK not in callee or "site-packages" in callee:
            return
        caller = caller_frame.f_code.co_filename
        if MARK not in caller or caller == callee or "site-packages" in caller:
            return
        self.edges.add(
            (
                f"{short(caller)}:{caller_frame.f_code.co_name}",
                f"{short(callee)}:{frame.f_code.co_name}",
            )
        )

    def install(self) -> None:
        """Profile this thread and every thread started after it."""
        sys.setprofile(self)
        threading.setprofile(self)


def files(edges: set[Edge]) -> set[str]:
    """Return the files the edges touch."""
    return {end.rsplit(":", 1)[0] for edge in edges for end in edge}


def launcher_main() -> None:
    """Run the command after `--` in this process, traced between SIGUSR1 and SIGUSR2."""
    out = Path(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1 :]
    tracer = Tracer()

    def start(*_: object) -> None:
        tracer.edges.clear()
        tracer.on = True

    def stop(*_: object) -> None:
        tracer.on = False
        out.write_text(json.dumps(sorted(tracer.edges)))

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    tracer.install()
    assert command[1] == "-m", command
    sys.argv = [command[2], *command[3:]]
    runpy.run_module(command[2], run_name="__main__", alter_sys=True)


async def trace(out_dir: Path) -> dict[str, Any]:
    """Return the walk of one traced run_cell: translator and gateway edges and files."""
    from mcp import Client

    from loomgate.translator.mcp_server.server import build_server
    from loomgate.translator.mcp_server.settings import Settings
    from tests.support.gateways import GatewayProcess

    gateway_edges = out_dir / "gateway-edges.json"
    gw = GatewayProcess(
        state_dir=out_dir / "state",
        launcher=[sys.executable, __file__, str(gateway_edges), "--"],
    )
    gw.state_dir.mkdir()
    gw.start()
    try:
        os.environ.update(LOOMGATE_URL=gw.url, LOOMGATE_TOKEN=gw.token)
        server = build_server(Settings.from_args(["--gateway", gw.url, "--quiet"]))
        async with Client(server) as client:
            warm = await client.call_tool("run_cell", {"code": "1+1"})
            assert "Out[1]: 2" in str(warm.content), warm
            tracer = Tracer()
            tracer.install()
            assert gw.proc is not None
            gw.proc.send_signal(signal.SIGUSR1)
            await asyncio.sleep(0.5)  # the signal handler runs between the gateway's callbacks
            tracer.on = True
            result = await client.call_tool("run_cell", {"code": "1+1"})
            tracer.on = False
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
            gw.proc.send_signal(signal.SIGUSR2)
            for _ in range(100):
                if gateway_edges.exists():
                    break
                await asyncio.sleep(0.05)
            assert "Out[2]: 2" in str(result.content), result
    finally:
        gw.stop()
    translator = tracer.edges
    gateway = {tuple(edge) for edge in json.loads(gateway_edges.read_text())}
    both = translator | gateway  # type: ignore[operator]
    pairs = {(a.rsplit(":", 1)[0], b.rsplit(":", 1)[0]) for a, b in both}
    return {
        "files": len(files(both)),
        "file pairs": len(pairs),
        "calls between files": len(both),
        "translator files": len(files(translator)),
        "translator calls": len(translator),
        "gateway files": len(files(gateway)),  # type: ignore[arg-type]
        "gateway calls": len(gateway),
        "edges": sorted(both),
    }


def main() -> None:
    """Print the walk's figures (and with --json, every edge)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true", help="print every edge as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        walk = asyncio.run(trace(Path(tmp)))
    if args.json:
        print(json.dumps(walk, indent=1))
    else:
        print({key: value for key, value in walk.items() if key != "edges"})


if __name__ == "__main__":
    if len(sys.argv) > 2 and "--" in sys.argv:
        launcher_main()
    else:
        main()
