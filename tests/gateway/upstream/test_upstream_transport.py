"""Upstream mode over a harder network: TLS with a self-signed certificate, connections cut
mid-cell (the websocket is opened again, the record notes the window), an upstream's kernel
limit, and a Jupyter client that goes through loomgate to the upstream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.gateway.upstream.test_upstream_mode import API, ended, lines
from tests.support.cells import run
from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess
from tests.support.kernel_ws import KernelWebsocket
from tests.support.proxies import DropProxy, self_signed_tls
from tests.support.sse import events, next_event
from tests.support.upstreams import UpstreamProcess, running, upstream_gateway


@pytest.fixture
async def tls_proxy(upstream: UpstreamProcess, tmp_path: Path) -> AsyncIterator[DropProxy]:
    """TLS with a self-signed certificate in front of the upstream; it can cut connections."""
    proxy = DropProxy(upstream.port, tls=self_signed_tls(tmp_path))
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()


async def started(gateway: GatewayProcess) -> httpx.AsyncClient:
    """Return a client of `gateway`, once it is up (started from a thread: the TLS proxy it
    asks the upstream through runs on this event loop)."""
    await asyncio.to_thread(gateway.start)
    return httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers, timeout=120)


async def test_tls_with_verify_false_and_cut_connections(
    upstream: UpstreamProcess, tls_proxy: DropProxy, tmp_path: Path, gate: Gate
) -> None:
    assert tls_proxy.server is not None
    port = tls_proxy.server.sockets[0].getsockname()[1]
    url = f"https://127.0.0.1:{port}"
    checked = upstream_gateway(tmp_path / "checked", url, upstream.token)
    try:
        async with await started(checked) as http:
            r = await http.post(f"{API}/kernels", json={})
            assert r.status_code == 503, r.text
            assert "failed the TLS handshake" in r.json()["message"], r.text
            assert "set verify = false" in r.json()["message"]
    finally:
        await asyncio.to_thread(checked.stop)
    trusting = upstream_gateway(
        tmp_path / "trusting", url, upstream.token, "--upstream-verify", "false"
    )
    try:
        async with await started(trusting) as http:
            r = await http.post(f"{API}/kernels", json={})
            assert r.status_code == 201, r.text
            kernel = r.json()["kernel"]["id"]
            assert (await run(http, kernel, "print('over tls')"))["state"] == "completed"
            # Every connection through the proxy is cut while a cell runs: the websocket is
            # opened again, the cell is followed to its end, and its record notes the window.
            async with events(http, kernel) as stream:
                running = await run(
                    http,
                    kernel,
                    f"print('before', flush=True)\n{gate.wait}\nprint('after')",
                    wait=0,
                )
                await next_event(stream, "output", number=running["number"])
                tls_proxy.drop()
                await next_event(stream, "kernel", kernel_id=kernel, phase="ready")
                gate.open()
                await ended(stream, running["number"], "completed")
            r = await http.get(f"{API}/kernels/{kernel}/executions/{running['number']}")
            record = r.json()["execution"]
            assert len(record["gaps"]) == 1, record
            assert await lines(http, kernel, running["number"], "stdout") == ["before", "after"]
            await http.delete(f"{API}/kernels/{kernel}")
    finally:
        await asyncio.to_thread(trusting.stop)


async def test_a_jupyter_client_through_loomgate_is_recorded(
    upstream: UpstreamProcess, tmp_path: Path
) -> None:
    gateway = upstream_gateway(tmp_path / "state", upstream.url, upstream.token)
    try:
        async with await started(gateway) as http:
            # JupyterLab's way in, through loomgate: the sessions API, then the kernel websocket.
            body = {"path": "a.ipynb", "type": "notebook", "kernel": {"name": "python3"}}
            r = await http.post("/api/sessions", json=body)
            assert r.status_code == 201, r.text
            kernel = r.json()["kernel"]["id"]
            assert kernel in upstream.kernels()
            async with events(http, kernel) as stream:
                async with KernelWebsocket(gateway.url, gateway.token, kernel, binary=False) as ws:
                    reply, _ = await ws.run("print('from the notebook')")
                    assert reply["content"]["status"] == "ok"
                await ended(stream, reply["content"]["execution_count"], "completed")
            number = reply["content"]["execution_count"]
            assert await lines(http, kernel, number, "stdout") == ["from the notebook"]
            r = await http.delete(f"/api/sessions/{r.json()['id']}")
            assert r.status_code == 204, r.text
    finally:
        gateway.stop()


@pytest.mark.parametrize("kind", ["kernel_gateway", "enterprise_gateway"])
async def test_an_upstream_kernel_limit_is_said_plainly(tmp_path: Path, kind: str) -> None:
    with running(tmp_path / "upstream", kind, max_kernels=1) as limited:
        gateway = upstream_gateway(tmp_path / "state", limited.url, limited.token)
        try:
            async with await started(gateway) as http:
                r = await http.post(f"{API}/kernels", json={})
                assert r.status_code == 201, r.text
                r = await http.post(f"{API}/kernels", json={})
                assert r.status_code == 503, r.text
                message = f"the upstream at {limited.url} refused: Resource Limit (HTTP 403)"
                assert r.json()["message"] == message, r.text
        finally:
            gateway.stop()
