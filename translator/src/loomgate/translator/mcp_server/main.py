"""`loomgate-mcp`: start the translator on stdio or Streamable HTTP."""

from __future__ import annotations

import logging
import sys

from loomgate.translator.client.errors import GatewayConfigError
from loomgate.translator.client.local_gateway import start_in_background
from loomgate.translator.client.selection import select_gateway
from loomgate.translator.client.startup_files import UninspectedSetting, uninspected_refused
from loomgate.translator.mcp_server.bearer_token import bearer_token
from loomgate.translator.mcp_server.settings import Settings, SettingsError


def main(argv: list[str] | None = None) -> int:
    """Run the MCP server until the host closes it; return the exit status."""
    try:
        settings = Settings.from_args(argv)
        uninspected_refused(settings.env)  # a bad LOOMGATE_UNINSPECTED stops it here
        token = bearer_token(settings) if settings.transport == "streamable-http" else None
    except (SettingsError, UninspectedSetting) as e:
        print(f"loomgate-mcp: {e}", file=sys.stderr)
        return 2
    if settings.autostart:
        start_local_gateway(settings)
    import anyio

    from loomgate.translator.mcp_server.server import build_server

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    server = build_server(settings, token)
    if settings.transport == "stdio":
        from loomgate.translator.mcp_server.stdio import serve_stdio

        anyio.run(serve_stdio, server)
    else:
        from loomgate.translator.mcp_server.http_transport import serve_http

        anyio.run(serve_http, server, settings, token)
    return 0


def start_local_gateway(settings: Settings) -> None:
    """Start the local gateway now if it is this translator's and down: its start then runs
    while the MCP SDK loads (a bad selection is left for the first tool call to report)."""
    try:
        target = select_gateway(settings.gateway, settings.env)
    except GatewayConfigError:
        return
    start_in_background(target)
