"""`loomgate run` on a real terminal: the first Ctrl-C interrupts, the second detaches."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import httpx

from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess
from tests.support.terminals import Terminal
from tests.translator.cli.test_commands import cli_env, loomgate

LOOMGATE = [sys.executable, "-m", "loomgate.translator.cli"]
API = "/api/loomgate/kernels"


async def test_second_ctrl_c_detaches_and_the_cell_runs_on(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path, gate: Gate
) -> None:
    await http.post(API, json={"name": "on-a-tty"})
    env = cli_env(gateway, tmp_path)
    # A cell that shrugs off interrupts until the gate opens: only detaching leaves it.
    code = (
        "print('ready', flush=True)\n"
        "while True:\n"
        "    try:\n"
        f"        {gate.wait}\n"
        "        break\n"
        "    except KeyboardInterrupt:\n"
        "        print('caught', flush=True)\n"
        "print('released')"
    )
    terminal = Terminal([*LOOMGATE, "run", "--kernel", "on-a-tty", code], env)
    try:
        number = int(terminal.expect(r"In \[(\d+)\]:\n")[1])
        terminal.expect(r"\nready\n")
        terminal.press_ctrl_c()
        terminal.expect(r"\^C interrupting; press Ctrl-C again to detach\n")
        terminal.expect(r"\ncaught\n")
        terminal.press_ctrl_c()
        terminal.expect(
            re.escape(
                f"detached: In [{number}] keeps running; follow it with `loomgate wait {number}`"
            )
        )
        assert terminal.wait() == 3  # detached: the cell runs on
        r = await http.get(f"{API}/on-a-tty/executions/{number}")
        assert r.json()["execution"]["state"] == "running"
        gate.open()
        status, out, _ = await loomgate(env, "wait", str(number), "--kernel", "on-a-tty")
        assert status == 0, (out, _)
        assert out.split("\n")[1:4] == ["ready", "caught", "released"], out
    finally:
        terminal.close()
        await http.delete(f"{API}/on-a-tty")
