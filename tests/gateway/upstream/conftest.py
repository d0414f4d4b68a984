"""Fixtures of the upstream-mode tests: an upstream of each kind per module, and a client of the
module's upstream-mode gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support.gateways import GatewayProcess
from tests.support.upstreams import KINDS, UpstreamProcess, running


@pytest.fixture(scope="module", params=KINDS)
def upstream(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UpstreamProcess]:
    """An upstream of each kind, shared by a module's tests (a module may define its own)."""
    with running(tmp_path_factory.mktemp("upstream"), request.param) as server:
        yield server


@pytest.fixture
async def http(recorder: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the module's upstream-mode gateway (across its restarts on its port)."""
    async with httpx.AsyncClient(
        base_url=recorder.url, headers=recorder.headers, timeout=120
    ) as client:
        yield client
