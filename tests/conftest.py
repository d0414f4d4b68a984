"""Fixtures shared by every test: real gateways and kernels, always stopped."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateways import GatewayProcess


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway shared by the session's tests (each test uses its own kernels)."""
    process = GatewayProcess(tmp_path_factory.mktemp("gateway") / "state").start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def fresh_gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway of the test's own, for tests that restart or kill it."""
    process = GatewayProcess(tmp_path / "state")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def http(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for the shared gateway, with its token."""
    async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers, timeout=120) as c:
        yield c


@pytest.fixture
async def kernel(http: httpx.AsyncClient) -> AsyncIterator[str]:
    """A fresh kernel on the shared gateway (stopped afterwards); yields its id."""
    r = await http.post("/api/loomgate/kernels", json={})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["kernel"]["id"]
    try:
        yield kernel_id
    finally:
        await http.delete(f"/api/loomgate/kernels/{kernel_id}")
