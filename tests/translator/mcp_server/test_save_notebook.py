"""The model's way to a notebook: `status(save_notebook=…)` through a real MCP client, writing
into the translator's working directory and nowhere else."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import nbformat
from mcp import Client

from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
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
