"""Fixtures for translator tests: an MCP server bound to the test gateway, real SDK clients."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.gateways import GatewayProcess
from tests.support.mcp_clients import CLIENT_KINDS
from tests.support.translators import stdio_for


@pytest.fixture
def settings(gateway: GatewayProcess, tmp_path: Path) -> Settings:
    """Translator settings for the shared gateway (no autostart, cwd in tmp)."""
    return Settings(
        gateway=gateway.url,
        autostart=False,
        cwd=str(tmp_path),
        env={"LOOMGATE_TOKEN": gateway.token},
    )


@pytest.fixture(params=CLIENT_KINDS, ids=["-".join(kind) for kind in CLIENT_KINDS])
def client_kind(request: pytest.FixtureRequest) -> tuple[str, str]:
    """Each protocol era in memory, and the current era over stdio (a spawned `loomgate-mcp`)."""
    era, transport = request.param
    return str(era), str(transport)


@pytest.fixture
def connect_client(settings: Settings, client_kind: tuple[str, str]) -> Callable[..., Any]:
    """Return a factory of MCP clients of a translator started with `settings`."""
    era, transport = client_kind

    def factory(**kwargs: Any) -> Client:
        chosen = kwargs.pop("settings", settings)
        if transport == "stdio":
            return Client(stdio_for(chosen), mode=era, **kwargs)
        return Client(build_server(chosen), mode=era, **kwargs)

    return factory
