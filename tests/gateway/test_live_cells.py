"""The agent's cells, live in the person's open notebook: a real JupyterLab with
jupyter-collaboration and loomgate's extension, a notebook session on a kernel, a second browser
(a Y client joined to the notebook's room), and the agent's `run_cell` through `loomgate-mcp`."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import nbformat
import pytest
from mcp import Client

from loomgate.translator.mcp_server.settings import Settings
from tests.support.collaboration import NotebookPeer, joined
from tests.support.gates import Gate
from tests.support.jupyter_lab import JupyterServerProcess, loomgate_cli
from tests.support.mcp_clients import text
from tests.support.translators import stdio_for

NOTEBOOK = "work/analysis.ipynb"
LATE_NOTEBOOK = "work/late.ipynb"
SAVE_TIMEOUT = 30.0
Cells = list[dict[str, Any]]


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServerProcess]:
    """One JupyterLab (collaboration and live cells on) for the tests that each open a notebook
    of their own in it (so a session, a kernel and a room of their own); stopped with its
    kernels."""
    server = JupyterServerProcess(tmp_path_factory.mktemp("shared-lab") / "person", agents=True)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def write_notebook(lab: JupyterServerProcess, notebook: str = NOTEBOOK) -> Path:
    """Write the person's notebook (one code cell) into the server's root; return its file."""
    path = lab.root / notebook
    path.parent.mkdir(parents=True, exist_ok=True)
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("x = 1", id="person-cell")]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbformat.write(notebook, path)
    return path


def agent(lab: JupyterServerProcess, tmp_path: Path) -> Client:
    """Return an MCP client of `loomgate-mcp` on the lab's server, as the person's agent."""
    settings = Settings(
        gateway=f"jupyter:{lab.port}", autostart=False, env=dict(lab.env), cwd=str(tmp_path)
    )
    return Client(stdio_for(settings))


def agent_cells(cells: Cells) -> Cells:
    """Return the cells marked as the agent's."""
    return [c for c in cells if "loomgate-agent" in c["metadata"].get("tags", [])]


async def saved(path: Path, check: Any, what: str) -> dict[str, Any]:
    """Return the notebook file (read as nbformat does) once the server has saved what `check`
    accepts."""
    deadline = time.monotonic() + SAVE_TIMEOUT
    while True:
        try:
            written = await asyncio.to_thread(path.read_text)
            notebook: dict[str, Any] = nbformat.reads(written, as_version=4)
        except nbformat.reader.NotJSONError:  # caught while the server writes it
            notebook = {"cells": "being written"}
        else:
            if check(notebook["cells"]):
                return notebook
        assert time.monotonic() < deadline, f"the file never had {what}: {notebook['cells']}"
        await asyncio.sleep(0.1)  # polls the file: the server's save has no event here


def info(lab: JupyterServerProcess) -> dict[str, Any]:
    """Return the extension's GET info."""
    r = httpx.get(f"{lab.url}/api/loomgate/info", headers=lab.headers, timeout=30)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


async def test_the_agents_cell_appears_while_it_runs_and_the_persons_edits_survive(
    shared_lab: JupyterServerProcess, tmp_path: Path
) -> None:
    lab = shared_lab
    path = write_notebook(lab)
    kernel_id = lab.open_notebook(NOTEBOOK)["kernel"]["id"]
    gate = Gate(tmp_path)
    assert "live_cells" in info(lab)["capabilities"]
    async with joined(lab, NOTEBOOK) as person, agent(lab, tmp_path) as mcp:
        connected = text(await mcp.call_tool("connect", {"kernel": "analysis.ipynb"}))
        assert connected.splitlines()[2] == (
            f"Your cells also appear in {NOTEBOOK} while the person has it open in JupyterLab: "
            "new cells at its end, tagged loomgate-agent, their outputs filled in as they run."
        )
        code = f"print('first', flush=True)\n{gate.wait}\nprint('second')\n6 * 7"
        running = await mcp.call_tool("run_cell", {"code": code, "wait_seconds": 0.5})
        assert "In [1] is still running" in text(running)

        # While it runs: a new cell at the end, the agent's, with the output so far.
        cells = await person.wait_for(
            lambda cells: (
                [c["outputs"] for c in agent_cells(cells)]
                == [[{"output_type": "stream", "name": "stdout", "text": "first\n"}]]
            ),
            "the running cell's first line",
        )
        assert [c["source"] for c in cells] == ["x = 1", code]
        ran = cells[-1]
        assert ran["id"] == f"loomgate-{kernel_id[:8]}-1"
        assert ran["execution_count"] == 1
        assert ran["metadata"]["loomgate"] == {
            "agent": True,
            "number": 1,
            "client": ran["metadata"]["loomgate"]["client"],
            "kernel_id": kernel_id,
            "state": "running",
        }
        assert ran["metadata"]["loomgate"]["client"].startswith("conversation")
        busy = person.notebook.ycells[1]["execution_state"]
        assert busy == "busy"

        # The person edits at the same time: their cell, a note below, and the agent's cell.
        with person.notebook.ydoc.transaction():
            person.notebook.set_cell(0, source="x = 2  # the person's edit")
            person.notebook.append_cell(
                {"cell_type": "markdown", "source": "The person's note", "metadata": {}}
            )
            person.notebook.ycells[1]["metadata"]["reviewed"] = True
        gate.open()
        done = await mcp.call_tool("wait", {"execution": 1})
        assert text(done).endswith("Out[1]: 42")

        ended = await person.wait_for(
            lambda cells: agent_cells(cells)[0]["metadata"]["loomgate"]["state"] == "completed",
            "the cell's end",
        )
        assert [c["source"] for c in ended] == [
            "x = 2  # the person's edit",
            code,
            "The person's note",
        ]
        assert ended[1]["metadata"]["reviewed"] is True
        assert ended[1]["outputs"] == [
            {"output_type": "stream", "name": "stdout", "text": "first\nsecond\n"},
            {
                "output_type": "execute_result",
                "execution_count": 1,
                "data": {"text/plain": "42"},
                "metadata": {},
            },
        ]
        assert person.notebook.ycells[1]["execution_state"] == "idle"

        # Many lines, few updates: the outputs are written coalesced, not line by line.
        before = person.updates
        lines = "for i in range(300):\n    print(i, flush=True)\n    time.sleep(0.004)"
        await mcp.call_tool("run_cell", {"code": f"import time\n{lines}"})
        streamed = await person.wait_for(
            lambda cells: (
                len(agent_cells(cells)) == 2
                and agent_cells(cells)[1]["metadata"]["loomgate"]["state"] == "completed"
            ),
            "the second cell's end",
        )
        text_out = "".join(o["text"] for o in agent_cells(streamed)[1]["outputs"])
        assert text_out == "".join(f"{i}\n" for i in range(300))
        assert 2 <= person.updates - before <= 40, person.updates - before

        # The file on disk, once the server has saved it, has the cells and the person's edits.
        on_disk = await saved(
            path,
            lambda cells: (
                [c["metadata"]["loomgate"]["state"] for c in agent_cells(cells)]
                == ["completed", "completed"]
            ),
            "the agent's cells with their outputs",
        )
        assert [c["source"] for c in on_disk["cells"]][:3] == [
            "x = 2  # the person's edit",
            code,
            "The person's note",
        ]
        assert on_disk["cells"][1]["outputs"] == ended[1]["outputs"]
        assert on_disk["cells"][3]["metadata"]["tags"] == ["loomgate-agent"]
        nbformat.validate(nbformat.reads(path.read_text(), as_version=4))


async def test_with_live_cells_off_the_notebook_is_untouched(tmp_path: Path) -> None:
    lab = JupyterServerProcess(tmp_path / "person", agents=True)
    off = loomgate_cli(lab.env, "jupyter", "enable", "--no-live-cells")
    assert off.returncode == 0, off.stderr
    assert "Live cells: off" in off.stdout
    try:
        lab.start()
        path = write_notebook(lab)
        lab.open_notebook(NOTEBOOK)
        assert "live_cells" not in info(lab)["capabilities"]
        async with joined(lab, NOTEBOOK) as person, agent(lab, tmp_path) as mcp:
            await untouched_by_the_agent(mcp, person, path)
    finally:
        lab.stop()


async def test_without_jupyter_collaboration_nothing_is_written_into_the_file(
    tmp_path: Path,
) -> None:
    lab = JupyterServerProcess(tmp_path / "person", agents=True)
    config = Path(lab.env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json"
    without = {"ServerApp": {"jpserver_extensions": {"jupyter_server_ydoc": False}}}
    config.write_text(json.dumps(without))
    try:
        lab.start()
        path = write_notebook(lab)
        before = path.read_bytes()
        lab.open_notebook(NOTEBOOK)
        assert "live_cells" not in info(lab)["capabilities"]
        async with agent(lab, tmp_path) as mcp:
            connected = text(await mcp.call_tool("connect", {"kernel": "analysis.ipynb"}))
            assert not_written(connected)
            ran = await mcp.call_tool("run_cell", {"code": "print('agent')"})
            assert text(ran).endswith("agent")
        assert path.read_bytes() == before
    finally:
        lab.stop()


def not_written(connected: str) -> bool:
    """Return whether connect's reply says the cells stay in the records."""
    return connected.splitlines()[2] == (
        f"Your cells are not written into {NOTEBOOK}; they stay in this kernel's records "
        '(read_output, status(save_notebook="session.ipynb"); for the person: '
        f"loomgate export --kernel {NOTEBOOK})."
    )


async def untouched_by_the_agent(mcp: Client, person: NotebookPeer, path: Path) -> None:
    """Run the agent's cell; the shared notebook and its file get the person's edit only."""
    connected = text(await mcp.call_tool("connect", {"kernel": "analysis.ipynb"}))
    assert not_written(connected)
    ran = await mcp.call_tool("run_cell", {"code": "print('agent')"})
    assert text(ran).endswith("agent")
    # An edit made after the agent's cell ended: once it is saved, anything the agent's cell
    # wrote would have been saved with it.
    person.notebook.set_cell(0, source="x = 3")
    on_disk = await saved(path, lambda cells: cells[0]["source"] == "x = 3", "the person's edit")
    assert [c["source"] for c in on_disk["cells"]] == ["x = 3"]
    assert [c["source"] for c in person.cells()] == ["x = 3"]


async def test_output_a_thread_prints_after_its_cell_ended_reaches_the_cell(
    shared_lab: JupyterServerProcess, tmp_path: Path
) -> None:
    lab = shared_lab
    write_notebook(lab, LATE_NOTEBOOK)
    lab.open_notebook(LATE_NOTEBOOK)
    gate = Gate(tmp_path, "late")
    code = (
        "import threading\n\n"
        f"def late():\n    {gate.wait}\n    print('late', flush=True)\n\n"
        "threading.Thread(target=late).start()\nprint('started')"
    )
    async with joined(lab, LATE_NOTEBOOK) as person, agent(lab, tmp_path) as mcp:
        await mcp.call_tool("connect", {"kernel": "late.ipynb"})
        ran = await mcp.call_tool("run_cell", {"code": code})
        assert text(ran).endswith("started")
        await person.wait_for(
            lambda cells: (
                [(c["metadata"]["loomgate"]["state"], c["outputs"]) for c in agent_cells(cells)]
                == [
                    (
                        "completed",
                        [{"output_type": "stream", "name": "stdout", "text": "started\n"}],
                    )
                ]
            ),
            "the cell's end",
        )
        gate.open()  # the thread prints once the cell has ended
        cells = await person.wait_for(
            lambda cells: "late" in str(agent_cells(cells)[0]["outputs"]), "the late line"
        )
        assert agent_cells(cells)[0]["outputs"] == [
            {"output_type": "stream", "name": "stdout", "text": "started\nlate\n"}
        ]
        assert agent_cells(cells)[0]["metadata"]["loomgate"]["state"] == "completed"
        assert person.notebook.ycells[1]["execution_state"] == "idle"
        read = await mcp.call_tool("read_output", {"execution": 1})
        assert text(read).splitlines()[-2:] == ["1│started", "2│late"]  # the record has it too
