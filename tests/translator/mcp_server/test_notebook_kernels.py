"""An agent in the person's live notebook kernel: a real JupyterLab with loomgate's extension,
a notebook driven as JupyterLab drives it, and `loomgate-mcp` over stdio (the SDK's client)
that finds it, attaches by the notebook's path and shares its variables and numbering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess
from tests.support.jupyter_lab import JupyterServerProcess, loomgate_cli
from tests.support.kernel_ws import KernelWebsocket
from tests.support.mcp_clients import text
from tests.support.translators import stdio

INSPECTORS = """
import ast

def inspect(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "rmtree":
            raise RuleBlock("shutil.rmtree is blocked here")
"""
JUPYTER_VARIABLES = ("JUPYTER_CONFIG_DIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR")


def agent_env(lab: JupyterServerProcess) -> dict[str, str]:
    """Return what a translator on the person's machine sees: their Jupyter dirs and setup."""
    return {name: lab.env[name] for name in (*JUPYTER_VARIABLES, "XDG_CONFIG_HOME")}


async def test_an_agent_works_in_the_notebook_the_person_has_open(
    gateway: GatewayProcess, lab: JupyterServerProcess, tmp_path: Path
) -> None:
    setup = Path(lab.env["XDG_CONFIG_HOME"]) / "loomgate"
    setup.mkdir(parents=True)
    (setup / "startup.py").write_text("STARTED = True\n")
    (setup / "inspectors.py").write_text(INSPECTORS)
    # The person lets agents into their notebooks' kernels (closed to them otherwise).
    (setup / "sandbox.toml").write_text("jupyter_api_open_to_agents = true\n")
    kernel_id = lab.open_notebook("work/analysis.ipynb")["kernel"]["id"]
    person_cell, stuck = Gate(tmp_path, "person-cell-gate"), Gate(tmp_path, "stuck-gate")
    async with KernelWebsocket(lab.url, lab.token, kernel_id, binary=True) as ws:
        async with Client(stdio(gateway, env=agent_env(lab))) as mcp:
            await agent_session(mcp, ws, lab, kernel_id, person_cell, stuck)
        # The conversation is over; the person's kernel and variables are still there.
        reply, _ = await ws.run("who, sum(data)")
        assert reply["content"]["execution_count"] == 9
    async with Client(stdio(gateway, env=agent_env(lab))) as mcp:
        forced = await mcp.call_tool("stop_kernel", {"kernel": "analysis.ipynb", "force": True})
        assert text(forced) == f"Stopped kernel {kernel_id[:8]}; its records stay readable."
    async with httpx.AsyncClient(base_url=lab.url, headers=lab.headers) as http:
        assert (await http.get("/api/kernels")).json() == []


async def agent_session(
    mcp: Client,
    ws: KernelWebsocket,
    lab: JupyterServerProcess,
    kernel_id: str,
    person_cell: Gate,
    stuck: Gate,
) -> None:
    """Drive the agent's side: find, attach, read, run, wait, input, interrupt, stop."""
    name = f"jupyter:{lab.port}"
    await ws.run("data = list(range(10))")
    await ws.run("1/0")
    listing = text(await mcp.call_tool("list_kernels", {}))
    assert f"Kernels on Jupyter server {name} at {lab.url} (root {lab.root}):" in listing
    assert listing.splitlines()[-1].split()[-1] == "work/analysis.ipynb"

    connected = await mcp.call_tool("connect", {"kernel": "analysis.ipynb"})
    assert text(connected).split("\n") == [
        f"Connected to kernel {kernel_id[:8]} serving work/analysis.ipynb on {name} "
        "(2 executions so far).",
        "This kernel belongs to a Jupyter server the person uses: their cells and yours "
        "share its variables and its In [N] numbering.",
        # jupyter-collaboration is installed here; no browser has the notebook open yet.
        "Your cells also appear in work/analysis.ipynb while the person has it open in "
        "JupyterLab: new cells at its end, tagged loomgate-agent, their outputs filled in as "
        "they run.",
        "Installed inspectors.py in this kernel; it runs again after every restart.",
    ]
    failed = text(await mcp.call_tool("read_output", {"execution": 2}))
    assert failed.splitlines()[-1].endswith("ZeroDivisionError: division by zero")
    seen = await mcp.call_tool("run_cell", {"code": "sum(data), 'STARTED' in dir()"})
    assert text(seen).endswith("Out[3]: (45, False)")  # startup.py is not the person's
    blocked = await mcp.call_tool("run_cell", {"code": "import shutil; shutil.rmtree('/x')"})
    assert "RuleBlock: shutil.rmtree is blocked here" in text(blocked)

    # A cell the person runs: the agent's is refused, naming it; wait follows it.
    running = await ws.execute(f"print('person', flush=True)\n{person_cell.wait}\n'done'")
    await ws.answer(running, "stream")
    busy = await mcp.call_tool("run_cell", {"code": "1"})
    assert busy.is_error and text(busy) == (
        "The kernel is busy running In [5]; the cell was not run. "
        "Use wait(execution=5) to wait for it or interrupt() to stop it."
    )
    person_cell.open()
    waited: Any = await mcp.call_tool("wait", {"execution": 5})
    assert text(waited).endswith("Out[5]: 'done'")

    # input() in the agent's cell, answered through send_input.
    asking = await mcp.call_tool(
        "run_cell", {"code": "who = input('who? ')\nprint('hi', who)", "wait_seconds": 5}
    )
    assert "In [6] is waiting for input" in text(asking)
    answered = await mcp.call_tool("send_input", {"value": "ada"})
    assert text(answered).endswith("hi ada")

    # The agent interrupts its own long cell.
    long = await mcp.call_tool("run_cell", {"code": stuck.wait, "wait_seconds": 0.5})
    assert "In [7] is still running" in text(long)
    stopped = await mcp.call_tool("interrupt", {})
    assert "KeyboardInterrupt" in text(stopped)

    # The person's next cell sees the agent's variables, numbered after the agent's.
    reply, _ = await ws.run("who")
    assert reply["content"]["execution_count"] == 8

    refused = await mcp.call_tool("stop_kernel", {"kernel": "analysis.ipynb"})
    assert refused.is_error and "force=true" in text(refused)
    assert "work/analysis.ipynb" in text(refused)


async def test_a_notebooks_kernel_is_closed_to_the_agent_until_the_person_opens_it(
    gateway: GatewayProcess, lab: JupyterServerProcess
) -> None:
    kernel_id = lab.open_notebook("analysis.ipynb")["kernel"]["id"]
    async with Client(stdio(gateway, env=agent_env(lab))) as mcp:
        # connect is how a model reaches a notebook's kernel on the person's Jupyter server.
        connect = await mcp.call_tool("connect", {"kernel": "analysis.ipynb"})
        env = {**lab.env, "LOOMGATE_URL": gateway.url, "LOOMGATE_TOKEN": gateway.token}
        opened = loomgate_cli(env, "agents", "open", "analysis.ipynb")
        connected = await mcp.call_tool("connect", {"kernel": "analysis.ipynb"})
        ran = await mcp.call_tool("run_cell", {"code": "6 * 7"})
    sentence = (
        f"Kernel {kernel_id[:8]} is not sandboxed by loomgate, so a model may not use it; only "
        f"the person opens it to agents (`loomgate agents open {kernel_id[:8]}`)."
    )
    assert connect.is_error and text(connect).startswith(sentence[:-1]), text(connect)
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.strip() == (
        f"kernel {kernel_id[:8]} is open to agents: a model may use it whatever its sandbox"
    )
    assert not connected.is_error, text(connected)
    assert not ran.is_error and text(ran).endswith("42"), text(ran)


def test_the_cli_reaches_a_notebook_and_names_servers_without_loomgate(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    # A gateway of its own: the shared one may still hold another test's conversation kernel
    # (in its grace period), and this test reads the gateway's section whole.
    gateway = fresh_gateway.start()
    lab = JupyterServerProcess(tmp_path / "person")
    plain = JupyterServerProcess(tmp_path / "plain", app="server", extension=False)
    other = JupyterServerProcess(tmp_path / "colleague")
    # The same person's machine: one runtime dir; only the lab enables loomgate.
    plain.env["JUPYTER_RUNTIME_DIR"] = lab.env["JUPYTER_RUNTIME_DIR"]
    try:
        lab.start()
        plain.start()
        lab.open_notebook("analysis.ipynb")
        env = {**lab.env, "LOOMGATE_URL": gateway.url, "LOOMGATE_TOKEN": gateway.token}
        ran = loomgate_cli(env, "run", "--kernel", "analysis.ipynb", "x = 6 * 7\nx")
        assert (ran.returncode, ran.stdout.splitlines()[1]) == (0, "Out[1]: 42"), ran.stderr
        listed = loomgate_cli(env, "kernels")
        assert listed.returncode == 0, listed.stderr
        sections = listed.stdout.split("\n\n")
        assert sections[0] == f"No kernels on {gateway.url}."
        by_port = {lab.port: sections[1 + (lab.port > plain.port)]}
        by_port[plain.port] = sections[1 + (plain.port > lab.port)]
        table = by_port[lab.port].splitlines()
        assert table[-2].split()[-1] == "analysis.ipynb"
        # A notebook's kernel is closed to agents unless the person opens it.
        assert table[-1].startswith("not open to agents: "), table
        assert by_port[plain.port].strip() == (
            f"Jupyter server jupyter:{plain.port} at {plain.url} (root {plain.root}) has no "
            "loomgate extension; to reach its kernels: `loomgate jupyter enable` (or enable "
            "the loomgate.gateway server extension), then restart that server."
        )
        missing = loomgate_cli(env, "run", "--kernel", "nowhere.ipynb", "1")
        assert missing.returncode == 2
        assert "no kernel serves a notebook 'nowhere.ipynb'" in missing.stderr
        # A second JupyterLab with a notebook of the same name: the person chooses.
        other.env["JUPYTER_RUNTIME_DIR"] = lab.env["JUPYTER_RUNTIME_DIR"]
        other.start()
        other.open_notebook("analysis.ipynb")
        twice = loomgate_cli(env, "run", "--kernel", "analysis.ipynb", "1")
        assert twice.returncode == 2
        assert "'analysis.ipynb' names kernels on several Jupyter servers: " in twice.stderr
        assert f"on jupyter:{lab.port}" in twice.stderr
        assert f"on jupyter:{other.port}" in twice.stderr
        chosen = loomgate_cli(
            env, "run", "--gateway", f"jupyter:{other.port}", "--kernel", "analysis.ipynb", "7"
        )
        assert chosen.stdout.splitlines()[1] == "Out[1]: 7", chosen.stderr
    finally:
        try:
            plain.stop()
            other.stop()
        finally:
            lab.stop()
