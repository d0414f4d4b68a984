"""Upstream mode across the failures of either end: the gateway restarted (kernels stay on the
upstream and are attached again), the upstream restarted (its kernels are gone, and said so), a
kernel that dies on the upstream (restarted there, the numbering going on here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.upstream.test_upstream_mode import API, lines
from tests.support.cells import run
from tests.support.gateways import GatewayProcess, wait_refused
from tests.support.sse import events, next_event
from tests.support.upstreams import KINDS, UpstreamProcess, running, upstream_gateway


@pytest.fixture(params=KINDS)
def upstream(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UpstreamProcess]:
    """An upstream of each kind, of the test's own."""
    with running(tmp_path / "upstream", request.param) as server:
        yield server


@pytest.fixture
def recorder(upstream: UpstreamProcess, tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway in upstream mode of the test's own (tests kill it)."""
    gateway = upstream_gateway(tmp_path / "state", upstream.url, upstream.token)
    try:
        yield gateway.start()
    finally:
        gateway.stop()


async def test_kernels_outlive_the_gateway_and_are_attached_again(
    http: httpx.AsyncClient, recorder: GatewayProcess, upstream: UpstreamProcess
) -> None:
    r = await http.post(f"{API}/kernels", json={"name": "kept"})
    kernel_id = r.json()["kernel"]["id"]
    await run(http, kernel_id, "kept = 'still here'\nprint(kept)")
    recorder.kill()
    wait_refused(recorder.url)
    assert kernel_id in upstream.kernels()  # the kernel runs on without the gateway
    recorder.start()
    r = await http.get(f"{API}/kernels/{kernel_id}")
    assert r.status_code == 200, r.text
    assert r.json()["kernel"]["alive"] is True, r.text
    again = await run(http, kernel_id, "print(kept)")
    assert again["number"] == 2  # the records and the numbering go on
    assert await lines(http, kernel_id, 2, "stdout") == ["still here"]
    assert await lines(http, kernel_id, 1, "stdout") == ["still here"]


async def test_kernels_the_restarted_upstream_lost_end_with_the_reason(
    http: httpx.AsyncClient, upstream: UpstreamProcess
) -> None:
    r = await http.post(f"{API}/kernels", json={})
    kernel_id = r.json()["kernel"]["id"]
    await run(http, kernel_id, "print('before')")
    async with events(http, kernel_id) as stream:
        upstream.kill()
        upstream.start()  # the same port, none of the old kernels
        gone = await next_event(stream, "kernel", kernel_id=kernel_id, phase="stopped")
    assert "no longer on the upstream" in gone["reason"], gone
    assert await lines(http, kernel_id, 1, "stdout") == ["before"]  # nothing recorded is lost


async def test_a_kernel_that_dies_on_the_upstream_is_restarted_there(
    http: httpx.AsyncClient, upstream: UpstreamProcess
) -> None:
    r = await http.post(f"{API}/kernels", json={})
    kernel_id = r.json()["kernel"]["id"]
    await run(http, kernel_id, "x = 1")
    async with events(http, kernel_id) as stream:
        died = await run(http, kernel_id, "import os\nprint('going', flush=True)\nos._exit(1)")
        await next_event(stream, "kernel", kernel_id=kernel_id, phase="ready")
    r = await http.get(f"{API}/kernels/{kernel_id}/executions/{died['number']}")
    record = r.json()["execution"]
    assert record["state"] == "died", record
    after = await run(http, kernel_id, "'x' in dir()")
    assert after["number"] == died["number"] + 1
    assert await lines(http, kernel_id, after["number"], "result") == ["False"]
