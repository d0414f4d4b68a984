"""The model's way to a notebook: `status(save_notebook=…)` through a real MCP client, writing
into the translator's working directory and nowhere else, also while a confined kernel keeps
turning a folder of the path into a link out of it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import nbformat
from mcp import Client

from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.gateways import GatewayProcess
from tests.support.mcp_clients import conversation, stop_conversation_kernel, text


async def test_status_saves_the_session_as_a_notebook_in_the_working_directory(
    connect_client: Any, settings: Settings
) -> None:
    cwd = Path(settings.cwd)
    async with conversation(connect_client) as mcp:
        await mcp.call_tool("run_cell", {"code": "x = 6\nprint('x is', x)"})
        await mcp.call_tool("run_cell", {"code": "x * 7"})
        result = await mcp.call_tool("status", {"save_notebook": "work/session.ipynb"})
        assert not result.is_error, text(result)
        said = text(result)
        assert said.startswith("Saved work/session.ipynb: 2 code cells (In [1] to In [2]).\n\n")
        assert "In [2]" in said.split("\n\n", 1)[1]  # the status itself follows
        book = nbformat.read(cwd / "work" / "session.ipynb", as_version=4)
        nbformat.validate(book)
        assert [c.execution_count for c in book.cells] == [1, 2]
        assert book.cells[1].outputs[0]["data"] == {"text/plain": "42"}
        assert book.cells[0].metadata["loomgate"]["client"].startswith("conversation ")
        # Saving again replaces the earlier export.
        await mcp.call_tool("run_cell", {"code": "3"})
        again = await mcp.call_tool("status", {"save_notebook": str(cwd / "work/session.ipynb")})
        assert not again.is_error, text(again)
        assert len(nbformat.read(cwd / "work" / "session.ipynb", as_version=4).cells) == 3


async def test_status_refuses_a_path_outside_the_working_directory(settings: Settings) -> None:
    cwd = Path(settings.cwd)
    root = await asyncio.to_thread(os.path.realpath, cwd)
    async with Client(build_server(settings), mode="legacy") as mcp:
        try:
            await mcp.call_tool("run_cell", {"code": "1"})
            result = await mcp.call_tool("status", {"save_notebook": "../escaped.ipynb"})
            assert result.is_error
            assert text(result) == (
                f"Not saved: ../escaped.ipynb is outside the working directory ({root}); "
                'give a path inside it, e.g. save_notebook="session.ipynb".'
            )
            result = await mcp.call_tool("status", {"save_notebook": "notes.txt"})
            assert text(result) == (
                "Not saved: notes.txt does not end in .ipynb; give a notebook file name such as "
                "session.ipynb."
            )
        finally:
            await stop_conversation_kernel(mcp)
    assert not (cwd.parent / "escaped.ipynb").exists()


# Run in the kernel: a thread that turns `work` into a link to OUTSIDE and back, again and again,
# each for a few milliseconds (a save's check and its write lie about that far apart), counting
# its turns (a save made `work` while it was gone: that one is put aside).
FLIPPER = """
import os, threading
turns, stop = [0], threading.Event()
def flip():
    while not stop.is_set():
        try:
            os.makedirs('work', exist_ok=True)
            os.rename('work', 'work.real')
            os.symlink({outside!r}, 'work')
            stop.wait(0.002)
            os.unlink('work')
            os.rename('work.real', 'work')
            stop.wait(0.002)
            turns[0] += 1
        except OSError:
            if os.path.isdir('work.real'):
                os.rename('work.real', f'work.aside{{turns[0]}}-{{os.urandom(4).hex()}}')
threading.Thread(target=flip, daemon=True).start()
"""
SAVES = 40


async def test_a_link_the_kernel_flips_never_leads_a_save_outside(
    confined_gateway: GatewayProcess, confined_root: Path
) -> None:
    gateway = confined_gateway.start()
    project, outside = confined_root / "project", confined_root / "outside"
    outside.mkdir()
    settings = Settings(
        gateway=gateway.url,
        autostart=False,
        cwd=str(project),
        env={"LOOMGATE_TOKEN": gateway.token},
    )
    async with Client(build_server(settings), mode="legacy") as mcp:
        try:
            started = await mcp.call_tool(
                "run_cell", {"code": FLIPPER.format(outside=str(outside))}
            )
            assert not started.is_error, text(started)
            said = []
            for _ in range(SAVES):
                result = await mcp.call_tool("status", {"save_notebook": "work/session.ipynb"})
                said.append(text(result).split("\n")[0])
            turned = await mcp.call_tool("run_cell", {"code": "stop.set(); turns[0]"})
            # It kept turning while the saves ran (each turn takes some 4 ms).
            assert int(text(turned).split("Out[2]: ")[1].split()[0]) >= SAVES // 4, text(turned)
        finally:
            await stop_conversation_kernel(mcp)
    assert list(outside.iterdir()) == [], said
    # Saved, or refused in a sentence (the link was there when the path was checked, or when
    # it was written): never a failure of the translator's own.
    unsaid = [line for line in said if not line.startswith(("Saved work/", "Not saved: "))]
    assert unsaid == []
