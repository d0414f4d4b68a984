"""`loomgate export` as a real subprocess against a real gateway: the notebook on stdout or in a
file, a selection, and the files it will not replace."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import httpx
import nbformat

from tests.support.cells import run
from tests.support.gateways import GatewayProcess

LOOMGATE = [sys.executable, "-m", "loomgate.translator.cli"]


async def loomgate(gateway: GatewayProcess, cwd: Path, *args: str) -> tuple[int, str, str]:
    """Run `loomgate ARGS` in `cwd` against `gateway`; return exit status, stdout and stderr."""
    env = {**os.environ, "LOOMGATE_URL": gateway.url, "LOOMGATE_TOKEN": gateway.token}
    process = await asyncio.create_subprocess_exec(
        *LOOMGATE,
        *args,
        env=env,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_export_writes_the_notebook_to_stdout_or_a_file(
    gateway: GatewayProcess, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    name = f"export-{os.urandom(3).hex()}"
    r = await http.post("/api/loomgate/kernels", json={"name": name})
    kernel = r.json()["kernel"]["id"]
    try:
        await run(http, kernel, "print('one')")
        await run(http, kernel, "2 + 2")
        status, out, err = await loomgate(gateway, tmp_path, "export", "--kernel", name)
        assert status == 0, err
        book = nbformat.reads(out, as_version=4)
        nbformat.validate(book)
        assert [c["source"] for c in book.cells] == ["print('one')", "2 + 2"]
        assert (
            out == json.dumps(json.loads(out), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        )

        status, out, err = await loomgate(
            gateway, tmp_path, "export", "--kernel", name, "-o", "last.ipynb", "--executions", "-1:"
        )
        assert (status, out) == (0, ""), err
        assert err == "Saved last.ipynb: 1 code cell (In [2]).\n"
        saved = nbformat.read(tmp_path / "last.ipynb", as_version=4)
        assert saved.cells[0].outputs[0]["data"] == {"text/plain": "4"}
        # An earlier export is replaced; the person's own notebook never is.
        status, _, err = await loomgate(
            gateway, tmp_path, "export", "--kernel", name, "-o", "last.ipynb"
        )
        assert status == 0, err
        assert len(nbformat.read(tmp_path / "last.ipynb", as_version=4).cells) == 2
        theirs = tmp_path / "analysis.ipynb"
        theirs.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
        status, _, err = await loomgate(
            gateway, tmp_path, "export", "--kernel", name, "-o", str(theirs)
        )
        assert status == 2
        assert err == (
            f"loomgate: not saved: {theirs} exists and is not a notebook loomgate exported; "
            "choose another name (an earlier export is replaced, any other file never)\n"
        )
        assert json.loads(theirs.read_text())["metadata"] == {}
        status, _, err = await loomgate(
            gateway, tmp_path, "export", "--kernel", name, "--executions", "3:1"
        )
        assert status == 2
        assert err.startswith("loomgate: executions '3:1' is not a selection; expected A:B"), err
    finally:
        await http.delete(f"/api/loomgate/kernels/{kernel}")
