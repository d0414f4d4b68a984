"""Records survive gateway restarts and kernel deaths; conversation kernels follow their grace."""

from __future__ import annotations

import os
import signal

import httpx
import pytest
from tests.gateways import GatewayProcess, alive, wait_gone
from tests.sse import events, next_event

API = "/api/loomgate/kernels"


def client(gateway: GatewayProcess) -> httpx.AsyncClient:
    """Return an HTTP client for `gateway`."""
    return httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers, timeout=120)


async def test_records_survive_gateway_sigkill(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "durable"})
        kernel = r.json()["kernel"]["id"]
        code = "for i in range(1000): print('kept', i)"
        r = await http.post(f"{API}/durable/executions", json={"code": code, "wait": 60})
        assert r.json()["execution"]["state"] == "completed"
        code = "import time\nprint('before the crash', flush=True)\ntime.sleep(120)"
        r = await http.post(
            f"{API}/durable/executions", json={"code": code, "wait": 60, "until_silent": 0.5}
        )
        assert r.json()["execution"]["state"] == "running"
    fresh_gateway.kill()  # also checks that the kernel process exits with its gateway
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.get(API, params={"all": "true"})
        gone = [k for k in r.json()["kernels"] if k["id"] == kernel]
        assert gone and gone[0]["state"] == "gone" and gone[0]["executions"] == 2
        r = await http.get(f"{API}/durable/executions/1/streams/combined", params={"lines": "-1:"})
        assert r.json()["lines"][0]["text"] == "kept 999"
        assert r.json()["total"] == 1000
        r = await http.get(f"{API}/durable/executions/2", params={"head": 5})
        execution = r.json()["execution"]
        assert execution["state"] == "lost"
        assert [x["text"] for x in execution["output"]["head"]] == ["before the crash"]
        r = await http.post(f"{API}/durable/executions", json={"code": "1"})
        assert r.status_code == 503
        assert "no longer running" in r.json()["message"]


async def kernel_pid(http: httpx.AsyncClient, kernel: str) -> int:
    """Return the process id of `kernel`."""
    r = await http.post(
        f"{API}/{kernel}/executions", json={"code": "import os; os.getpid()", "wait": 30, "head": 1}
    )
    return int(r.json()["execution"]["output"]["head"][0]["text"])


@pytest.mark.parametrize(
    ("how", "reason"),
    [("exit", "exited with code 3"), ("sigkill", "killed by SIGKILL")],
)
async def test_kernel_death_mid_cell(
    gateway: GatewayProcess, http: httpx.AsyncClient, kernel: str, how: str, reason: str
) -> None:
    pid = await kernel_pid(http, kernel)
    async with events(http, kernel) as stream:
        if how == "exit":
            code = "import os, time\nprint('going', flush=True)\ntime.sleep(0.2)\nos._exit(3)"
        else:
            code = "import time\nprint('going', flush=True)\ntime.sleep(120)"
        r = await http.post(f"{API}/{kernel}/executions", json={"code": code})
        number = r.json()["execution"]["number"]
        await next_event(stream, "output")
        if how == "sigkill":
            os.kill(pid, signal.SIGKILL)
        r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 60, "head": 5})
        execution = r.json()["execution"]
        assert execution["state"] == "died"
        assert reason in execution["died"]["reason"]
        assert execution["died"]["restarted"] is True
        assert [x["text"] for x in execution["output"]["head"]] == ["going"]
        await next_event(stream, "kernel", phase="ready")
    assert not alive(pid)
    r = await http.post(
        f"{API}/{kernel}/executions", json={"code": "'alive'", "wait": 30, "head": 1}
    )
    assert r.json()["execution"]["number"] == number + 1
    assert r.json()["execution"]["output"]["head"][0]["text"] == "'alive'"
    assert await kernel_pid(http, kernel) != pid


async def test_conversation_kernel_stops_after_grace(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.extra_args = ["--conversation-grace", "1"]
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"lifetime": "conversation", "name": "conv"})
        kernel = r.json()["kernel"]["id"]
        pid = await kernel_pid(http, kernel)
        async with events(http) as watcher:
            async with events(http, kernel, hold=True):
                r = await http.get(f"{API}/{kernel}")
                assert r.json()["kernel"]["holders"] == 1
                code = "import time; time.sleep(3); print('finished')"
                r = await http.post(f"{API}/{kernel}/executions", json={"code": code})
            # Holder gone: grace (1 s) passes while the cell still runs; the stop waits for it.
            event = await next_event(watcher, "kernel", kernel_id=kernel, phase="stopped")
        assert event["kernel"]["state"] in ("dead", "gone")
        r = await http.get(f"{API}/{kernel}/executions/latest", params={"head": 5})
        execution = r.json()["execution"]
        assert execution["state"] == "completed"
        assert [x["text"] for x in execution["output"]["head"]] == ["finished"]
        assert wait_gone({pid}, 30) == set()


async def test_persistent_kernel_ignores_holders(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.extra_args = ["--conversation-grace", "0.2"]
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "keeper"})
        kernel = r.json()["kernel"]["id"]
        async with events(http, kernel, hold=True):
            pass
        async with events(http, kernel) as stream:
            r = await http.post(f"{API}/{kernel}/executions", json={"code": "1", "wait": 30})
            assert r.json()["execution"]["state"] == "completed"
            await next_event(stream, "execution")
        r = await http.get(f"{API}/keeper")
        assert r.json()["kernel"]["alive"] is True


async def test_create_or_get_by_name(http: httpx.AsyncClient) -> None:
    r = await http.post(API, json={"name": "named-one"})
    assert r.status_code == 201
    first = r.json()["kernel"]["id"]
    try:
        r = await http.post(API, json={"name": "named-one"})
        assert r.status_code == 200
        assert r.json()["kernel"]["id"] == first
        assert r.json()["created"] is False
        r = await http.get(f"{API}/{first[:8]}")
        assert r.json()["kernel"]["name"] == "named-one"
        r = await http.get(f"{API}/zzzzzzzz")
        assert r.status_code == 404
    finally:
        r = await http.delete(f"{API}/named-one")
        assert r.status_code == 200
    r = await http.get(f"{API}/named-one")
    assert r.json()["kernel"]["state"] == "gone"
