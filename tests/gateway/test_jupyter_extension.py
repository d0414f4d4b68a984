"""loomgate enabled in a person's JupyterLab: the server works as before for JupyterLab (driven
as JupyterLab drives it: sessions API, v1 kernel websocket, REST interrupt and restart), and
every cell run there is a record under the server's own auth, found by its notebook's path."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import httpx

from tests.support import jupyter_lab
from tests.support.gates import Gate
from tests.support.gateways import client
from tests.support.jupyter_lab import JupyterServerProcess
from tests.support.kernel_ws import KernelWebsocket

API = "/api/loomgate"


async def lines(http: httpx.AsyncClient, kernel: str, number: int) -> list[str]:
    """Return the text of execution `number`'s combined output."""
    ref = quote(kernel, safe="")
    r = await http.get(f"{API}/kernels/{ref}/executions/{number}/streams/combined")
    assert r.status_code == 200, r.text
    return [line["text"] for line in r.json()["lines"]]


async def test_jupyterlab_works_as_before_and_every_cell_is_recorded(
    lab: JupyterServerProcess, gate: Gate
) -> None:
    session = lab.open_notebook("work/analysis.ipynb")
    kernel_id = session["kernel"]["id"]
    async with client(lab) as http:
        async with KernelWebsocket(lab.url, lab.token, kernel_id, binary=True) as ws:
            reply, _ = await ws.run("data = list(range(10))\nprint('loaded', len(data))")
            assert reply["content"]["execution_count"] == 1
            reply, _ = await ws.run("1/0")
            assert reply["content"]["status"] == "error"
            # JupyterLab's interrupt button: REST, while a cell runs.
            running = await ws.execute(f"print('waiting', flush=True)\n{gate.wait}")
            await ws.answer(running, "stream")  # the cell runs: an interrupt reaches it
            r = await http.post(f"/api/kernels/{kernel_id}/interrupt")
            assert r.status_code == 204
            interrupted = await ws.answer(running, "execute_reply")
            assert interrupted["content"]["ename"] == "KeyboardInterrupt"
            reply, _ = await ws.run("len(data)")
            if reply["content"]["status"] == "aborted":
                # ipykernel stops aborting requests after an error only once its loop has
                # turned: one that overtook that turn is refused unrun, and is sent again.
                reply, _ = await ws.run("len(data)")
            assert (reply["content"]["status"], reply["content"]["execution_count"]) == ("ok", 4)
        kernels = (await http.get(f"{API}/kernels")).json()["kernels"]
        [kernel] = kernels
        assert (kernel["id"], kernel["paths"], kernel["executions"]) == (
            kernel_id,
            ["work/analysis.ipynb"],
            4,
        )
        # The notebook's path (or its tail) names its kernel; the numbers are IPython's.
        assert await lines(http, "analysis.ipynb", 1) == ["loaded 10"]
        assert (await lines(http, "work/analysis.ipynb", 2))[-1] == (
            "ZeroDivisionError: division by zero"
        )
        third = (await http.get(f"{API}/kernels/{kernel_id}/executions/3")).json()["execution"]
        assert third["state"] == "interrupted"
        assert (await http.get(f"{API}/info")).json()["mode"] == "extension"
        # The server's own auth guards loomgate's endpoints.
        async with httpx.AsyncClient(base_url=lab.url) as anonymous:
            assert (await anonymous.get(f"{API}/kernels")).status_code == 403
        # JupyterLab's restart: variables go, the notebook's records and numbering stay.
        r = await http.post(f"/api/kernels/{kernel_id}/restart")
        assert r.status_code == 200, r.text
        async with KernelWebsocket(lab.url, lab.token, kernel_id, binary=True) as ws:
            reply, _ = await ws.run("'data' in dir()")
            assert reply["content"]["execution_count"] == 5
        assert await lines(http, "analysis.ipynb", 5) == ["False"]  # the result stream
        # Closing the notebook (DELETE the session) shuts its kernel down, as before.
        r = await http.delete(f"/api/sessions/{session['id']}")
        assert r.status_code == 204
        gone = (await http.get(f"{API}/kernels/analysis.ipynb")).json()["kernel"]
        assert (gone["id"], gone["alive"]) == (kernel_id, False)


async def test_a_restarted_server_keeps_its_notebooks_records(tmp_path: Path) -> None:
    server = JupyterServerProcess(tmp_path / "person")
    try:
        server.start()
        kernel_id = server.open_notebook("analysis.ipynb")["kernel"]["id"]
        async with KernelWebsocket(server.url, server.token, kernel_id, binary=True) as ws:
            await ws.run("print('before the restart')")
        server.stop()
        server.start()
        async with client(server) as http:
            assert (await http.get(f"{API}/kernels")).json()["kernels"] == []
            everything = (await http.get(f"{API}/kernels", params={"all": "true"})).json()
            [old] = everything["kernels"]
            assert (old["id"], old["alive"], old["paths"]) == (
                kernel_id,
                False,
                ["analysis.ipynb"],
            )
            assert await lines(http, "analysis.ipynb", 1) == ["before the restart"]
    finally:
        server.stop()


def test_enable_is_what_jupyter_reads(tmp_path: Path) -> None:
    server = JupyterServerProcess(tmp_path / "person")  # runs `loomgate jupyter enable`
    listed = subprocess.run(
        [sys.executable, "-m", "jupyter_server.extension.serverextension", "list"],
        env=server.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    plain = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout)
    assert "loomgate.gateway enabled" in plain
    assert "loomgate.gateway 0.1.0 OK" in plain  # validated: importable, with its hooks
    disabled = jupyter_lab.loomgate_cli(server.env, "jupyter", "disable")
    assert disabled.returncode == 0
    status = jupyter_lab.loomgate_cli(server.env, "jupyter", "status")
    assert status.stdout.startswith("loomgate's Jupyter server extension: not enabled")


def test_a_server_without_the_extension_has_no_loomgate_endpoints(tmp_path: Path) -> None:
    server = JupyterServerProcess(tmp_path / "plain", app="server", extension=False)
    try:
        server.start()
        assert httpx.get(f"{server.url}{API}/info", headers=server.headers).status_code == 404
        status = jupyter_lab.loomgate_cli(server.env, "jupyter", "status")
        assert status.returncode == 0
        assert status.stdout.splitlines()[1] == (
            f"jupyter:{server.port} at http://127.0.0.1:{server.port}: no loomgate extension; "
            "`loomgate jupyter enable` (or enable the loomgate.gateway server extension), "
            "then restart that server"
        )
    finally:
        server.stop()
