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
from tests.support.mcp_clients import ERAS, TRANSPORTS
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


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    """Each protocol era in turn."""
    return str(request.param)


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """In memory (the server in this process), and over stdio (a spawned `loomgate-mcp`)."""
    return str(request.param)


@pytest.fixture
def connect_client(settings: Settings, era: str, transport: str) -> Callable[..., Any]:
    """Return a factory of MCP clients of a translator started with `settings`."""

    def factory(**kwargs: Any) -> Client:
        chosen = kwargs.pop("settings", settings)
        if transport == "stdio":
            return Client(stdio_for(chosen), mode=era, **kwargs)
        return Client(build_server(chosen), mode=era, **kwargs)

    return factory
