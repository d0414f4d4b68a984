"""Fixtures for translator tests: an MCP server bound to the test gateway, real SDK clients."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from loomgate.translator.server import build_server
from loomgate.translator.session import Settings
from tests.gateways import GatewayProcess
from tests.translators import stdio_for

ERAS = ["legacy", "auto"]  # the initialize handshake era, and 2026-07-28
TRANSPORTS = ["memory", "stdio"]


@pytest.fixture(autouse=True)
def private_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point XDG_CONFIG_HOME at an empty dir so no real startup.py or gateways.toml is used."""
    config = tmp_path / "config"
    (config / "loomgate").mkdir(parents=True)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return config / "loomgate"


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


@contextlib.asynccontextmanager
async def conversation(connect_client: Callable[..., Client]) -> AsyncIterator[Client]:
    """An MCP client of a fresh translator; its conversation kernel is stopped afterwards."""
    async with connect_client() as client:
        try:
            yield client
        finally:
            await stop_conversation_kernel(client)


async def stop_conversation_kernel(client: Client) -> None:
    """Stop the kernel the conversation used, if any (tests leave no kernels behind)."""
    listing = await client.call_tool("list_kernels", {})
    data = listing.structured_content or {}
    if data.get("current"):
        await client.call_tool("stop_kernel", {"kernel": data["current"]})


def text(result: Any) -> str:
    """Return all text content of a tool result, joined."""
    return "\n".join(block.text for block in result.content if block.type == "text")
