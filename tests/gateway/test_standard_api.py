"""Standard Jupyter clients keep working, and what they run is recorded too."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.support.gateways import GatewayProcess
from tests.support.kernel_ws import KernelWebsocket

API = "/api/loomgate/kernels"


@pytest.fixture
async def rest_kernel(http: httpx.AsyncClient) -> str:
    """A kernel created through the standard REST API (deleted afterwards)."""
    r = await http.post("/api/kernels", json={"name": "python3"})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["id"]
    yield kernel_id
    await http.delete(f"/api/kernels/{kernel_id}")


async def test_standard_endpoints_answer(http: httpx.AsyncClient, rest_kernel: str) -> None:
    assert (await http.get("/api/kernelspecs")).json()["default"] == "python3"
    ids = [k["id"] for k in (await http.get("/api/kernels")).json()]
    assert rest_kernel in ids
    r = await http.get(f"{API}/{rest_kernel}")
    assert r.json()["kernel"]["lifetime"] == "persistent"
    r = await http.post(f"/api/kernels/{rest_kernel}/interrupt")
    assert r.status_code == 204


@pytest.mark.parametrize("binary", [True, False], ids=["v1-binary", "legacy-json"])
async def test_websocket_execution_is_recorded(
    gateway: GatewayProcess, http: httpx.AsyncClient, rest_kernel: str, binary: bool
) -> None:
    async with KernelWebsocket(gateway.url, gateway.token, rest_kernel, binary=binary) as ws:
        reply, iopub = await ws.run("print('over the socket')\n21 * 2")
    assert reply["content"]["status"] == "ok"
    count = reply["content"]["execution_count"]
    assert any(m["header"]["msg_type"] == "execute_result" for m in iopub)
    # The gateway reads the kernel's IOPub on its own socket, which may lag this client's.
    r = await http.get(f"{API}/{rest_kernel}/executions/{count}", params={"head": 10, "wait": 30})
    execution = r.json()["execution"]
    assert execution["source"] == "other"
    assert execution["state"] == "completed"
    assert execution["code"] == "print('over the socket')\n21 * 2"
    assert [x["text"] for x in execution["output"]["head"]] == ["over the socket", "42"]


async def test_websocket_and_loomgate_share_numbering(
    gateway: GatewayProcess, http: httpx.AsyncClient, kernel: str
) -> None:
    r = await http.post(f"{API}/{kernel}/executions", json={"code": "a = 1", "wait": 30})
    assert r.status_code == 201, r.text
    assert r.json()["execution"]["number"] == 1
    async with KernelWebsocket(gateway.url, gateway.token, kernel, binary=True) as ws:
        reply, _ = await ws.run("a + 1")
    assert reply["content"]["execution_count"] == 2
    r = await http.post(f"{API}/{kernel}/executions", json={"code": "a + 2", "wait": 30})
    assert r.status_code == 201, r.text
    assert r.json()["execution"]["number"] == 3
    r = await http.get(f"{API}/{kernel}/executions")
    assert [(e["number"], e["source"]) for e in r.json()["executions"]] == [
        (1, "loomgate"),
        (2, "other"),
        (3, "loomgate"),
    ]


async def test_websocket_client_gets_its_own_input_request(
    gateway: GatewayProcess, http: httpx.AsyncClient, kernel: str
) -> None:
    async with KernelWebsocket(gateway.url, gateway.token, kernel, binary=True) as ws:
        msg_id = await ws.execute("print('got', input('name: '))", allow_stdin=True)
        while True:
            msg = await asyncio.wait_for(ws.receive(), 60)
            if msg["channel"] == "stdin":
                break
        assert msg["header"]["msg_type"] == "input_request"
        assert msg["content"]["prompt"] == "name: "
        await ws.send("stdin", ws.message("input_reply", {"value": "grace"}, parent=msg["header"]))
        while True:
            msg = await asyncio.wait_for(ws.receive(), 60)
            if msg["channel"] == "shell" and msg["parent_header"]["msg_id"] == msg_id:
                break
    r = await http.get(f"{API}/{kernel}/executions/latest", params={"wait": 30, "head": 5})
    assert [x["text"] for x in r.json()["execution"]["output"]["head"]] == ["got grace"]


async def test_back_to_back_socket_executions_are_all_recorded(
    gateway: GatewayProcess, http: httpx.AsyncClient, rest_kernel: str
) -> None:
    async with KernelWebsocket(gateway.url, gateway.token, rest_kernel, binary=True) as ws:
        counts = [(await ws.run(f"{i}+1"))[0]["content"]["execution_count"] for i in range(20)]
    assert counts == list(range(1, 21))
    # The socket's client has its last reply; the gateway's IOPub may not yet have brought the
    # idle that ends the last record: wait for that end.
    await http.get(f"{API}/{rest_kernel}/executions/20", params={"wait": 30})
    r = await http.get(f"{API}/{rest_kernel}/executions", params={"limit": 100})
    records = r.json()["executions"]
    assert [e["number"] for e in records] == counts
    assert all(e["state"] == "completed" for e in records)
