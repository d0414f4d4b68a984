"""The MCP server: its instructions, its lifespan (one conversation), and its tools."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.types import Tool

from loomgate.translator import __version__
from loomgate.translator.mcp_server import checkpoint_tools, execution_tools, kernel_tools
from loomgate.translator.mcp_server.app_tools import APP_TOOLS
from loomgate.translator.mcp_server.apps_extension import ExecutionViewApps, apps_listing
from loomgate.translator.mcp_server.argument_errors import (
    former_names_accepted,
    one_sentence_argument_errors,
    unknown_argument_refusal,
)
from loomgate.translator.mcp_server.bearer_token import BearerToken, BearerTokenVerifier
from loomgate.translator.mcp_server.conversation import Conversation
from loomgate.translator.mcp_server.settings import Settings
from loomgate.translator.mcp_server.tool_registry import compact_schema, register_tools
from loomgate.translator.presentation.http_access import endpoint_url

INSTRUCTIONS = (
    "Persistent Jupyter (IPython) kernels. Variables survive between cells and between "
    "conversations. Each cell gets a number: In [N]. run_cell returns after wait_seconds even "
    "if the cell still runs; the cell keeps running, so continue with wait, read_output, "
    "search_output or interrupt. Long output is shortened to its head and tail; read_output "
    "reads any line range and search_output finds lines."
)
# Over Streamable HTTP one server serves many MCP sessions, and they share one conversation.
SHARED_SESSIONS = (
    " Every MCP session of this server shares one conversation: the same current kernel and "
    "variables, and a connect() in one session moves every session to that kernel. To work "
    "apart, pass kernel=NAME on each call."
)


# In the order a host lists them (SPEC.md's table).
TOOLS = (
    execution_tools.run_cell,
    execution_tools.wait,
    execution_tools.read_output,
    execution_tools.search_output,
    execution_tools.interrupt,
    kernel_tools.reset,
    execution_tools.send_input,
    execution_tools.status,
    kernel_tools.connect,
    checkpoint_tools.checkpoint,
    checkpoint_tools.rollback,
    kernel_tools.list_kernels,
    kernel_tools.stop_kernel,
)


class LoomgateServer(MCPServer[Conversation]):
    """The SDK's server, listing the tools' schemas compact (a host puts them in the model's
    context on every turn)."""

    async def list_tools(self) -> list[Tool]:
        """Return the tools as the SDK lists them, each schema compact."""
        listed = []
        for tool in await super().list_tools():
            output = tool.output_schema
            update = {
                "input_schema": compact_schema(tool.input_schema),
                "output_schema": compact_schema(output) if output is not None else None,
            }
            listed.append(tool.model_copy(update=update))
        return listed


def build_server(settings: Settings, token: BearerToken | None = None) -> MCPServer[Conversation]:
    """Return the MCP server with all eleven tools registered for `settings`, and the MCP Apps
    execution view for the clients that negotiate it; over HTTP, every request must carry
    `token` as its bearer token (the SDK's check, on the app it serves)."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[Conversation]) -> AsyncIterator[Conversation]:
        """Yield the conversation; on exit release its kernel hold (its grace period starts)."""
        conversation = Conversation(settings)
        conversation.start()
        try:
            yield conversation
        finally:
            await conversation.close()

    server = LoomgateServer(
        "loomgate",
        version=__version__,
        instructions=INSTRUCTIONS
        + (SHARED_SESSIONS if settings.transport == "streamable-http" else ""),
        lifespan=lifespan,
        token_verifier=None if token is None else BearerTokenVerifier(token),
        auth=None if token is None else token_auth(settings),
        extensions=[ExecutionViewApps()],
        middleware=[
            one_sentence_argument_errors,
            former_names_accepted,
            unknown_argument_refusal(TOOLS + APP_TOOLS),
            apps_listing,
        ],
    )
    register_tools(server, TOOLS, schemas=settings.structured and settings.output_schemas)
    return server


def token_auth(settings: Settings) -> AuthSettings:
    """Return the SDK's auth settings for a server whose one token it issued itself: no OAuth
    routes, no scopes, tokens checked by the verifier alone."""
    issuer = endpoint_url(settings.host, settings.port, "")
    return AuthSettings(issuer_url=issuer, resource_server_url=None)  # type: ignore[arg-type]
