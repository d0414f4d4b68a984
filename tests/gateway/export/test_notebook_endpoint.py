"""GET /api/loomgate/kernels/{ref}/notebook on a real gateway and real kernels: a session's
cells as a notebook nbformat accepts and `jupyter nbconvert --to html` renders, for the full
and the monitor's read-only token, by name, id or notebook path, live or gone."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import nbformat

from tests.support.cells import PNG_8X8, run
from tests.support.gateways import GatewayProcess
from tests.support.jupyter_lab import JupyterServerProcess
from tests.support.kernel_ws import KernelWebsocket

API = "/api/loomgate"
JUPYTER = Path(sys.executable).parent / "jupyter"
SESSION = [
    'import sys\nprint("out 1", flush=True)\nprint("err 1", file=sys.stderr, flush=True)\n'
    'print("out 2", flush=True)',
    'for i in range(5):\n    print(f"\\r{i * 25}%", end="", flush=True)\nprint()',
    "import base64\nfrom IPython.display import HTML, Image, display\n"
    f'display(Image(data=base64.b64decode("{PNG_8X8}")))\ndisplay(HTML("<b>bold</b>"))\n6 * 7',
    "1 / 0",
]


async def exported(http: httpx.AsyncClient, ref: str, **params: Any) -> dict[str, Any]:
    """Return the notebook of `ref`, checked to be a notebook nbformat accepts."""
    r = await http.get(f"{API}/kernels/{quote(ref, safe='')}/notebook", params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/x-ipynb+json"
    book = nbformat.reads(r.text, as_version=4)
    nbformat.validate(book)
    data: dict[str, Any] = r.json()
    return data


def codes(book: dict[str, Any]) -> list[int]:
    """Return the numbers of the notebook's code cells."""
    return [c["execution_count"] for c in book["cells"] if c["cell_type"] == "code"]


async def test_a_session_exports_as_a_notebook_nbconvert_renders(
    gateway: GatewayProcess, http: httpx.AsyncClient, kernel: str, tmp_path: Path
) -> None:
    for code in SESSION:
        await run(http, kernel, code)
    assert (await http.post(f"{API}/kernels/{kernel}/reset")).status_code == 200
    await run(http, kernel, 'print("after the reset")', client="cli")
    book = await exported(http, kernel)
    kinds = [(c["cell_type"], c.get("execution_count")) for c in book["cells"]]
    assert kinds == [
        ("code", 1),
        ("code", 2),
        ("code", 3),
        ("code", 4),
        ("markdown", None),
        ("code", 5),
    ]
    first, progress, rich, error, reset, after = book["cells"]
    assert [(o["name"], o["text"]) for o in first["outputs"]] == [
        ("stdout", "out 1\n"),
        ("stderr", "err 1\n"),
        ("stdout", "out 2\n"),
    ]
    assert progress["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "100%\n"}]
    image, html, result = rich["outputs"]
    assert image["data"]["image/png"].strip() == PNG_8X8
    assert html["data"]["text/html"] == "<b>bold</b>"
    assert (result["output_type"], result["execution_count"]) == ("execute_result", 3)
    assert result["data"] == {"text/plain": "42"}
    [raised] = error["outputs"]
    assert (raised["ename"], raised["evalue"]) == ("ZeroDivisionError", "division by zero")
    assert any("\x1b[" in line for line in raised["traceback"])  # as the kernel coloured it
    assert reset["source"].startswith("**The kernel was reset** here")
    assert after["metadata"]["loomgate"]["client"] == "cli"
    assert book["metadata"]["kernelspec"]["name"] == "python3"
    assert book["metadata"]["language_info"]["name"] == "python"
    assert book["metadata"]["language_info"]["file_extension"] == ".py"  # the kernel's own
    # The person's own tool renders it.
    path = tmp_path / "session.ipynb"
    path.write_text((await http.get(f"{API}/kernels/{kernel}/notebook")).text)
    converted = await asyncio.to_thread(
        subprocess.run,
        [str(JUPYTER), "nbconvert", "--to", "html", "--stdout", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert converted.returncode == 0, converted.stderr[-2000:]
    page = converted.stdout
    for shown in (
        "out 1",
        "err 1",
        "100%",
        "<b>bold</b>",
        "data:image/png;base64,",
        "ZeroDivisionError",
        "The kernel was reset",
        "after the reset",
    ):
        assert shown in page, shown


async def test_the_read_only_token_reads_the_notebook_and_nothing_more(
    gateway: GatewayProcess, http: httpx.AsyncClient, kernel: str
) -> None:
    await run(http, kernel, "print('seen')")
    headers = {"Authorization": f"token {gateway.monitor_token}"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=60) as monitor:
        book = await exported(monitor, kernel)
        assert book["cells"][0]["outputs"][0]["text"] == "seen\n"
        r = await monitor.post(f"{API}/kernels/{kernel}/executions", json={"code": "1"})
        assert r.status_code == 403
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as anonymous:
        assert (await anonymous.get(f"{API}/kernels/{kernel}/notebook")).status_code == 403


async def test_a_selection_a_bad_one_and_a_gone_kernel(
    http: httpx.AsyncClient, kernel: str
) -> None:
    for n in range(4):
        await run(http, kernel, f"print({n})")
    assert codes(await exported(http, kernel, executions="-2:")) == [3, 4]
    assert codes(await exported(http, kernel, executions="2:3")) == [2, 3]
    assert codes(await exported(http, kernel, source="other")) == []
    r = await http.get(f"{API}/kernels/{kernel}/notebook", params={"executions": "3:1"})
    assert r.status_code == 400
    assert r.json()["message"].startswith("executions '3:1' is not a selection; expected A:B")
    r = await http.get(f"{API}/kernels/{kernel}/notebook", params={"max_lines": "1"})
    assert (r.status_code, r.json()["error"]) == (400, "bad_request")
    long = await run(http, kernel, "for i in range(50): print(i)")
    book = await exported(http, kernel, executions=str(long["number"]), max_lines=10)
    [cell] = book["cells"]
    assert cell["outputs"][1]["data"]["text/plain"].endswith(
        f"loomgate output 5 --kernel {kernel} --lines 6:45"
    )
    assert (await http.delete(f"{API}/kernels/{kernel}")).status_code == 200
    assert codes(await exported(http, kernel)) == [1, 2, 3, 4, 5]  # records outlive it


async def test_a_notebooks_kernel_exports_by_its_path(lab: JupyterServerProcess) -> None:
    kernel_id = lab.open_notebook("work/analysis.ipynb")["kernel"]["id"]
    async with KernelWebsocket(lab.url, lab.token, kernel_id, binary=True) as ws:
        await ws.run("print('from the notebook')")
    async with httpx.AsyncClient(base_url=lab.url, headers=lab.headers, timeout=60) as http:
        await run(http, kernel_id, "print('from loomgate')", client="conversation 1a2b3c")
        book = await exported(http, "analysis.ipynb")
        assert [c["metadata"]["loomgate"]["source"] for c in book["cells"]] == ["other", "loomgate"]
        mine = await exported(http, "work/analysis.ipynb", client="conversation")
        assert [c["outputs"][0]["text"] for c in mine["cells"]] == ["from loomgate\n"]


async def test_a_death_shows_once_where_it_happened(http: httpx.AsyncClient, kernel: str) -> None:
    await run(http, kernel, "x = 1")
    # Flushing first: a kernel that exits at once may never send the cell's execute_input.
    died = await run(http, kernel, "import os\nprint('going', flush=True)\nos._exit(3)")
    assert died["state"] == "died"
    await run(http, kernel, "print('back')")  # waits for the restarter's new process
    book = await exported(http, kernel)
    kinds = [(c["cell_type"], c.get("execution_count")) for c in book["cells"]]
    assert kinds == [("code", 1), ("code", 2), ("markdown", None), ("code", 3)]
    assert book["cells"][1]["metadata"]["tags"] == ["loomgate-died"]
    assert book["cells"][2]["source"].startswith("**The kernel process died** here (")
