"""Fixtures for the gateway client's tests: a client of the shared gateway, and a kernel."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from loomgate.translator.client.gateway import GatewayClient
from tests.support.gateways import GatewayProcess


@pytest.fixture
async def client(gateway: GatewayProcess) -> AsyncIterator[GatewayClient]:
    """A client of the shared gateway."""
    async with GatewayClient(gateway.url, gateway.token, name="shared") as c:
        yield c


@pytest.fixture
async def kid(client: GatewayClient) -> AsyncIterator[str]:
    """A fresh kernel on the shared gateway, created through the client (stopped afterwards)."""
    reply = await client.create_kernel()
    kernel = reply["kernel"]
    assert reply["created"]
    try:
        yield kernel["id"]
    finally:
        if (await client.get_kernel(kernel["id"]))["alive"]:
            await client.stop_kernel(kernel["id"])
