"""Upstream mode's notebook export: cells run through a gateway on a stock Jupyter Server's
kernel come out of `GET …/notebook` as a notebook nbformat accepts, numbered, with the outputs
the upstream's kernel sent, the reset where it happened, and the kernel's language."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import nbformat
import pytest

from tests.support.cells import PNG_8X8, run
from tests.support.gateways import GatewayProcess
from tests.support.upstreams import UpstreamProcess, running, upstream_gateway

API = "/api/loomgate"
SESSION = [
    'import sys\nprint("out 1", flush=True)\nprint("err 1", file=sys.stderr, flush=True)\n'
    'print("out 2", flush=True)',
    "import base64\nfrom IPython.display import HTML, Image, display\n"
    f'display(Image(data=base64.b64decode("{PNG_8X8}")))\ndisplay(HTML("<b>bold</b>"))\n6 * 7',
    "1 / 0",
]


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamProcess]:
    """A stock Jupyter Server (one kind: the export reads the records upstream mode keeps,
    whatever the upstream is)."""
    with running(tmp_path_factory.mktemp("upstream"), "jupyter_server") as server:
        yield server


@pytest.fixture(scope="module")
def recorder(
    upstream: UpstreamProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """A gateway in upstream mode on `upstream`."""
    gateway = upstream_gateway(
        tmp_path_factory.mktemp("gw") / "state", upstream.url, upstream.token
    )
    try:
        yield gateway.start()
    finally:
        gateway.stop()


async def exported(http: httpx.AsyncClient, ref: str) -> dict[str, Any]:
    """Return the notebook of `ref`, checked to be a notebook nbformat accepts."""
    r = await http.get(f"{API}/kernels/{ref}/notebook")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/x-ipynb+json"
    nbformat.validate(nbformat.reads(r.text, as_version=4))
    book: dict[str, Any] = r.json()
    return book


async def test_an_upstream_kernels_cells_export_as_a_notebook(
    http: httpx.AsyncClient, upstream: UpstreamProcess
) -> None:
    r = await http.post(f"{API}/kernels", json={"name": "on-upstream"})
    assert r.status_code == 201, r.text
    kernel = str(r.json()["kernel"]["id"])
    try:
        assert kernel in upstream.kernels()  # the cells run there
        for code in SESSION:
            await run(http, kernel, code)
        assert (await http.post(f"{API}/kernels/{kernel}/reset")).status_code == 200
        await run(http, kernel, "print('after the reset')", client="cli")
        book = await exported(http, "on-upstream")  # by name
    finally:
        await http.delete(f"{API}/kernels/{kernel}")
    kinds = [(c["cell_type"], c.get("execution_count")) for c in book["cells"]]
    assert kinds == [("code", 1), ("code", 2), ("code", 3), ("markdown", None), ("code", 4)]
    streams, rich, error, reset, after = book["cells"]
    assert [c["source"] for c in (streams, rich, error)] == SESSION
    assert [(o["output_type"], o["name"], o["text"]) for o in streams["outputs"]] == [
        ("stream", "stdout", "out 1\n"),
        ("stream", "stderr", "err 1\n"),
        ("stream", "stdout", "out 2\n"),
    ]
    image, html, result = rich["outputs"]
    assert image["output_type"] == "display_data"
    assert image["data"]["image/png"].strip() == PNG_8X8
    assert (html["output_type"], html["data"]["text/html"]) == ("display_data", "<b>bold</b>")
    assert (result["output_type"], result["execution_count"]) == ("execute_result", 2)
    assert result["data"] == {"text/plain": "42"}
    [raised] = error["outputs"]
    assert (raised["output_type"], raised["ename"], raised["evalue"]) == (
        "error",
        "ZeroDivisionError",
        "division by zero",
    )
    assert raised["traceback"][-1].endswith("division by zero")
    assert error["metadata"]["loomgate"]["state"] == "error"
    assert reset["source"].startswith("**The kernel was reset** here")
    assert after["outputs"] == [
        {"output_type": "stream", "name": "stdout", "text": "after the reset\n"}
    ]
    assert after["metadata"]["loomgate"]["client"] == "cli"
    assert book["metadata"]["kernelspec"]["name"] == "python3"
    assert book["metadata"]["language_info"]["name"] == "python"  # as the upstream's kernel told
    assert book["metadata"]["loomgate"]["kernel"]["id"] == kernel
    # The kernel is gone from the upstream; its records, and so its notebook, stay here.
    assert kernel not in upstream.kernels()
    again = await exported(http, kernel)
    assert [c["source"] for c in again["cells"]] == [c["source"] for c in book["cells"]]
