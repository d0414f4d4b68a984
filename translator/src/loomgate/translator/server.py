"""The MCP server: its instructions, its lifespan (one conversation), and its tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.mcpserver import MCPServer

from loomgate.translator import __version__
from loomgate.translator.argument_errors import one_sentence_argument_errors
from loomgate.translator.session import Conversation, Settings
from loomgate.translator.tool_registry import register_tools
from loomgate.translator.tools import Tools

INSTRUCTIONS = (
    "Persistent Jupyter (IPython) kernels. Variables survive between cells and between "
    "conversations. Each cell gets a number: In [N]. run_cell returns after wait_seconds even "
    "if the cell still runs; the cell keeps running, so continue with wait, read_output, "
    "search_output or interrupt. Long output is shortened to its head and tail; read_output "
    "reads any line range and search_output finds lines."
)


@asynccontextmanager
async def conversation_lifespan(
    settings: Settings,
) -> AsyncIterator[Tools]:
    """Yield the conversation's tools; on exit release its kernel hold (the grace starts)."""
    conversation = Conversation(settings)
    conversation.start()
    try:
        yield Tools(conversation)
    finally:
        await conversation.close()


def build_server(settings: Settings) -> MCPServer[Tools]:
    """Return the MCP server with all eleven tools registered for `settings`."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[Tools]) -> AsyncIterator[Tools]:
        async with conversation_lifespan(settings) as tools:
            yield tools

    server: MCPServer[Tools] = MCPServer(
        "loomgate",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        middleware=[one_sentence_argument_errors],
    )
    register_tools(server, settings.result_mode == "structured")
    return server
