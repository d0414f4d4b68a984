"""Fixtures of the upstream-mode tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.support.gateways import GatewayProcess


@pytest.fixture
async def http(recorder: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the module's upstream-mode gateway (across its restarts on its port)."""
    async with httpx.AsyncClient(
        base_url=recorder.url, headers=recorder.headers, timeout=120
    ) as client:
        yield client
