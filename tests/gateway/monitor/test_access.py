"""The monitor credential reads what the page reads and is refused (403) everywhere else."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator

import httpx
import pytest
import websockets

from loomgate.gateway.monitor.access import READ_ONLY
from tests.support.gateways import GatewayProcess
from tests.support.sse import events, next_event

API = "/api/loomgate"


@pytest.fixture
async def monitor(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the shared gateway that holds only the monitor token."""
    headers = {"Authorization": f"token {gateway.monitor_token}"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=60) as client:
        yield client


async def test_the_page_needs_a_token(gateway: GatewayProcess) -> None:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as anonymous:
        refused = await anonymous.get("/loomgate/monitor")
        assert refused.status_code == 403
        assert "loomgate monitor" in refused.text
        wrong = await anonymous.get("/loomgate/monitor", params={"token": "not-the-token"})
        assert wrong.status_code == 403
        for token in (gateway.monitor_token, gateway.token):
            page = await anonymous.get("/loomgate/monitor", params={"token": token})
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            assert "<title>loomgate monitor</title>" in page.text
            assert "/*SCRIPT*/" not in page.text and "function connect()" in page.text
            assert "login" not in page.headers.get("set-cookie", "")  # no cookie for a token


async def test_the_monitor_reads_what_the_page_reads(
    gateway: GatewayProcess, http: httpx.AsyncClient, monitor: httpx.AsyncClient, kernel: str
) -> None:
    r = await http.post(
        f"{API}/kernels/{kernel}/executions",
        json={"code": "print('seen'); 1/0", "wait": 30, "client": "conversation abc123"},
    )
    number = r.json()["execution"]["number"]
    base = f"{API}/kernels/{kernel}"
    for path, params in [
        (f"{API}/info", {}),
        (f"{API}/kernels", {"all": "true"}),
        (base, {}),
        (f"{base}/executions", {"head": 5, "tail": 5}),
        (f"{base}/executions/{number}", {"head": 5}),
        (f"{base}/executions/{number}/streams/combined", {"lines": "1:3"}),
        (f"{base}/executions/{number}/traceback", {}),
        (f"{base}/search", {"query": "seen", "execution": "all"}),
        (f"{API}/tool-calls", {}),
    ]:
        r = await monitor.get(path, params=params)
        assert r.status_code == 200, (path, r.status_code, r.text)
    listed = (await monitor.get(f"{base}/executions", params={"head": 1})).json()["executions"]
    mine = next(x for x in listed if x["number"] == number)
    assert mine["client"] == "conversation abc123"
    assert mine["output"]["head"] == [{"n": 1, "text": "seen", "kind": "stdout"}]
    coloured = (await monitor.get(f"{base}/executions/{number}/traceback")).json()
    assert coloured["number"] == number
    assert "\x1b[" in coloured["text"] and "ZeroDivisionError" in coloured["text"]
    plain = await monitor.get(f"{base}/executions/{number}/streams/traceback")
    assert all("\x1b" not in line["text"] for line in plain.json()["lines"])
    async with events(monitor, kernel) as stream:  # following, without holding
        await http.post(f"{base}/executions", json={"code": "2 + 2", "wait": 30})
        event = await next_event(stream, "execution")
        assert event["kernel_id"] == kernel


async def test_a_traceback_of_a_cell_that_raised_nothing_is_not_found(
    http: httpx.AsyncClient, kernel: str
) -> None:
    r = await http.post(f"{API}/kernels/{kernel}/executions", json={"code": "1", "wait": 30})
    number = r.json()["execution"]["number"]
    r = await http.get(f"{API}/kernels/{kernel}/executions/{number}/traceback")
    assert r.status_code == 404
    assert r.json()["message"] == f"execution {number} raised no error"


async def test_the_monitor_changes_nothing(
    gateway: GatewayProcess, http: httpx.AsyncClient, monitor: httpx.AsyncClient, kernel: str
) -> None:
    base = f"{API}/kernels/{kernel}"
    r = await http.post(f"{base}/executions", json={"code": "x = 1", "wait": 30})
    number = r.json()["execution"]["number"]
    refused = [
        ("POST", f"{API}/kernels", {"name": "by-monitor"}),
        ("POST", f"{base}/executions", {"code": "x = 2"}),
        ("POST", f"{base}/interrupt", {}),
        ("POST", f"{base}/reset", {}),
        ("POST", f"{base}/setup", {"parts": []}),
        ("DELETE", base, None),
        ("POST", f"{base}/executions/{number}/input", {"value": "y"}),
        ("POST", f"{API}/shutdown", {"kernels": "keep"}),
        ("POST", f"{API}/tool-calls", {"tool_calls": []}),
        ("GET", "/api/kernels", None),
        ("POST", f"/api/kernels/{kernel}/restart", {}),
        ("DELETE", f"/api/kernels/{kernel}", None),
        ("GET", "/api/contents", None),
        ("GET", "/api/sessions", None),
    ]
    for method, path, body in refused:
        r = await monitor.request(method, path, json=body)
        assert r.status_code == 403, (method, path, r.status_code, r.text)
    r = await monitor.get(f"{API}/events", params={"kernel": kernel, "hold": "true"})
    assert r.status_code == 403
    ws_url = f"ws://127.0.0.1:{gateway.port}/api/kernels/{kernel}/channels"
    with pytest.raises(websockets.InvalidStatus) as refusal:
        async with websockets.connect(
            ws_url, additional_headers={"Authorization": f"token {gateway.monitor_token}"}
        ):
            pass
    assert refusal.value.response.status_code == 403
    # Nothing changed: the kernel runs, x is still 1, no kernel was made.
    r = await http.post(f"{base}/executions", json={"code": "x", "wait": 30, "head": 1})
    assert r.json()["execution"]["output"]["head"][0]["text"] == "1"
    names = [k["name"] for k in (await http.get(f"{API}/kernels")).json()["kernels"]]
    assert "by-monitor" not in names


# What the monitor token is refused, and whether the route is loomgate's (its refusal shape).
REFUSED_WITH_A_REASON = [
    ("POST", "kernels/{k}/executions", {"code": "x = 2"}, True),
    ("PUT", "kernels/{k}/setup", {"parts": []}, True),
    ("DELETE", "kernels/{k}", None, True),
    ("POST", "shutdown", {"kernels": "keep"}, True),
    ("GET", "events?kernel={k}&hold=true", None, True),
    ("POST", "/api/kernels/{k}/restart", {}, False),
    ("DELETE", "/api/kernels/{k}", None, False),
]


@pytest.mark.parametrize(("method", "path", "body", "loomgate"), REFUSED_WITH_A_REASON)
async def test_the_monitor_token_is_told_it_can_only_read(
    http: httpx.AsyncClient,
    monitor: httpx.AsyncClient,
    kernel: str,
    method: str,
    path: str,
    body: dict[str, object] | None,
    loomgate: bool,
) -> None:
    url = path.format(k=kernel) if path.startswith("/") else f"{API}/{path.format(k=kernel)}"
    r = await monitor.request(method, url, json=body)
    assert r.status_code == 403, r.text
    assert r.headers["content-type"].startswith("application/json")
    if loomgate:
        assert r.json() == {"error": "forbidden", "message": READ_ONLY}
    else:  # Jupyter's own API: its error shape, with the reason
        assert r.json()["message"] == READ_ONLY
    assert READ_ONLY.startswith("the monitor token can only read")
    # The kernel is untouched, and the full token is still what it was.
    state = await http.get(f"{API}/kernels/{kernel}")
    assert state.json()["kernel"]["alive"] is True


async def test_the_monitor_token_is_kept_private_and_across_restarts(
    fresh_gateway: GatewayProcess,
) -> None:
    fresh_gateway.start()
    first = fresh_gateway.monitor_token
    assert first and first != fresh_gateway.token
    for name in ("monitor_token", "gateway.json"):
        mode = (fresh_gateway.state_dir / name).stat().st_mode
        assert stat.S_IMODE(mode) == 0o600, name
    assert (
        json.loads((fresh_gateway.state_dir / "gateway.json").read_text())["monitor_token"] == first
    )
    fresh_gateway.stop()
    fresh_gateway.start()
    assert fresh_gateway.monitor_token == first


async def test_a_quiet_event_stream_is_kept_alive(monitor: httpx.AsyncClient, kernel: str) -> None:
    async with monitor.stream("GET", f"{API}/events", params={"kernel": kernel}) as r:
        lines = r.aiter_lines()
        assert await anext(lines) == "event: hello"

        async def first_comment() -> str:
            async for line in lines:
                if line.startswith(":"):
                    return line
            raise AssertionError("the stream ended")

        # Nothing happens on this kernel: after KEEPALIVE_SECONDS (5 s) a comment arrives.
        assert await asyncio.wait_for(first_comment(), 60) == ": keepalive"
