"""The rpc websocket (/api/loomgate/rpc) driven by a standard websocket client: every JSON
endpoint answers as over HTTP, calls are answered by id as they finish, bad messages (a call of
the shape no client sends any more among them) are refused in one sentence, and the server's
auth holds on the upgrade and on each call."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from websockets.asyncio.client import ClientConnection

from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess

API = "/api/loomgate"
CELL = """
import sys
from IPython.display import HTML, display
print("out")
print("err", file=sys.stderr)
display(HTML("<b>rich</b>"))
1/0
"""
VOLATILE = frozenset({"silent_for", "prewarmed"})  # seconds since the last output; the pool


def steady(value: Any) -> Any:
    """Return `value` without the fields that change from one moment to the next."""
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list | tuple):
        return [steady(v) for v in value]
    return value


def ws_url(gateway: GatewayProcess, route: str = "rpc") -> str:
    """Return the websocket address of `route` under /api/loomgate/."""
    return gateway.url.replace("http", "ws", 1) + f"{API}/{route}"


class Rpc:
    """An open rpc websocket that numbers its calls."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def send(self, message: dict[str, Any]) -> int:
        """Send one call (numbered unless it has an id); return its id."""
        number = message.setdefault("id", next(self.ids))
        await self.ws.send(json.dumps(message))
        return int(number)

    async def receive(self) -> dict[str, Any]:
        """Return the next answer."""
        answer: dict[str, Any] = json.loads(await asyncio.wait_for(self.ws.recv(), 60))
        return answer

    async def call(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
    ) -> tuple[int, Any]:
        """Return the status and body of one call of the rpc shape."""
        message: dict[str, Any] = {"method": method, "path": path}
        if query is not None:
            message["query"] = query
        if body is not None:
            message["body"] = body
        number = await self.send(message)
        answer = await self.receive()
        assert answer["id"] == number
        return answer["status"], answer["body"]


@pytest.fixture
async def rpc(gateway: GatewayProcess) -> AsyncIterator[Rpc]:
    """An rpc websocket open on the shared gateway with its token."""
    async with websockets.connect(ws_url(gateway), additional_headers=gateway.headers) as ws:
        yield Rpc(ws)


async def over_http(
    http: httpx.AsyncClient,
    method: str,
    path: str,
    query: dict[str, Any] | None = None,
    body: dict[str, Any] | None = None,
) -> tuple[int, Any]:
    """Return the status and JSON body HTTP answers to the same call."""
    r = await http.request(method, f"{API}/{path}", params=query, json=body)
    return r.status_code, r.json()


async def test_every_json_endpoint_answers_as_over_http(
    rpc: Rpc, http: httpx.AsyncClient, kernel: str, gate: Gate
) -> None:
    await http.post(f"{API}/kernels", json={"name": "rpc-table"})  # created: then found, 200
    r = await http.post(f"{API}/kernels/{kernel}/executions", json={"code": CELL, "wait": 30})
    assert r.status_code == 201, r.text
    number = r.json()["execution"]["number"]
    assert r.json()["execution"]["rich"], "the cell displays a rich output"
    k = f"kernels/{kernel}"
    e = f"{k}/executions/{number}"
    calls: list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]] = [
        ("GET", "info", None, None),
        ("GET", "kernels", {"all": "true"}, None),
        ("POST", "kernels", None, {"name": "rpc-table"}),
        ("POST", "kernels", None, {"name": 7}),
        ("GET", k, None, None),
        ("GET", "kernels/no-such-kernel", None, None),
        ("GET", f"{k}/executions", {"head": "2", "tail": "2", "since": "0"}, None),
        ("GET", f"{k}/executions", {"limit": "0"}, None),
        ("GET", e, {"wait": "5", "head": "3", "max_chars": "2"}, None),
        ("GET", f"{k}/executions/latest", {"tail": "1"}, None),
        ("GET", f"{k}/executions/999", None, None),
        ("GET", f"{k}/executions/soon", None, None),
        ("GET", f"{e}/streams/combined", {"lines": "1:3"}, None),
        ("GET", f"{e}/streams/stderr", {"lines": "-1:", "max_chars": "1"}, None),
        ("GET", f"{e}/streams/nowhere", None, None),
        ("GET", f"{e}/streams/stdout", {"lines": "three"}, None),
        ("GET", f"{e}/rich/0", None, None),
        ("GET", f"{e}/rich/9", None, None),
        ("GET", f"{e}/traceback", None, None),
        ("GET", f"{k}/search", {"query": "out", "execution": "all", "context": "1"}, None),
        ("GET", f"{k}/search", {"query": " er+ ", "mode": "regex", "ignore_case": "yes"}, None),
        ("GET", f"{k}/search", {"mode": "fuzzy", "query": "x"}, None),
        ("GET", f"{k}/search", None, None),
        ("POST", f"{k}/executions", None, {"code": 1}),
        ("POST", f"{k}/executions", None, {"code": "1", "client": 5}),
        ("POST", f"{k}/executions", None, {"code": "1", "head": -1}),
        ("POST", f"{e}/input", None, {"value": "y"}),
        ("POST", f"{e}/input", None, {}),
        ("POST", f"{k}/interrupt", None, None),
        ("PUT", f"{k}/setup", None, {"parts": "none"}),
        ("PUT", f"{k}/setup", None, {"parts": [], "wait": 5}),
        ("DELETE", "kernels/no-such-kernel", None, None),
        ("GET", "tool-calls", {"since": "0", "limit": "5"}, None),
        ("GET", "tool-calls", {"limit": "none"}, None),
        ("POST", "tool-calls", None, {"tool_calls": []}),
        ("POST", "shutdown", None, {"kernels": "maybe"}),
        ("DELETE", "info", None, None),  # 405, as jupyter_server writes it
        ("GET", f"{k}/interrupt", None, None),
        ("POST", f"{e}/traceback", None, None),
    ]
    await http.put(f"{API}/{k}/setup", json={"parts": [], "wait": 5})  # then unchanged: not run
    for method, path, query, body in calls:
        rpc_answer = await rpc.call(method, path, query, body)
        http_answer = await over_http(http, method, path, query, body)
        assert steady(rpc_answer) == steady(http_answer), (method, path, query, body)
    # A busy kernel refuses alike; acting calls answer with HTTP's status.
    started = await rpc.call("POST", f"{k}/executions", body={"code": gate.wait})
    assert started[0] == 201
    running = str(started[1]["execution"]["number"])
    busy = ("POST", f"{k}/executions", None, {"code": "2"})
    assert await rpc.call(*busy) == await over_http(http, *busy)
    assert (await rpc.call("GET", f"{k}/executions/current"))[1]["execution"]["number"] == int(
        running
    )
    interrupted = await rpc.call("POST", f"{k}/interrupt")
    assert interrupted[0] == 200 and interrupted[1]["execution"]["number"] == int(running)
    followed = await rpc.call("GET", f"{k}/executions/{running}", {"wait": "30"})
    assert followed[1]["execution"]["state"] == "interrupted"
    reset = await rpc.call("POST", f"{k}/reset")
    assert reset[0] == 200 and reset[1]["killed"] is None
    reported = {"conversation": "rpc", "tool": "run_cell", "summary": "ok", "duration": 0.1}
    kept = await rpc.call("POST", "tool-calls", body={"tool_calls": [reported]})
    assert kept[0] == 202 and kept[1]["tool_calls"][0]["tool"] == "run_cell"
    stopped = await rpc.call("DELETE", "kernels/rpc-table")
    assert stopped[0] == 200 and stopped[1]["kernel"]["name"] == "rpc-table"
    assert await rpc.call("GET", "kernels/rpc-table") == await over_http(
        http, "GET", "kernels/rpc-table"
    )


async def test_an_unknown_path_is_not_found_as_over_http(rpc: Rpc, http: httpx.AsyncClient) -> None:
    for path in ("nope", "kernels/k/nope", "kernels/k/executions/1/streams"):
        assert await rpc.call("GET", path) == (404, {"message": "Not Found", "reason": None})
        assert (await http.get(f"{API}/{path}")).status_code == 404, path
    # Not JSON endpoints (events, the websocket), or paths HTTP redirects (a trailing slash).
    for path in ("events", "rpc", "channel", "", "info/"):
        assert await rpc.call("GET", path) == (404, {"message": "Not Found", "reason": None})


async def test_arguments_in_the_path_are_percent_decoded(
    rpc: Rpc, http: httpx.AsyncClient, kernel: str
) -> None:
    await http.post(f"{API}/kernels/{kernel}/executions", json={"code": "1", "wait": 30})
    for path in (
        f"kernels/{kernel[:8]}%2D",
        f"kernels/{kernel}/executions/lat%65st",
        "kernels/%FF",
    ):
        answer = await rpc.call("GET", path)
        assert steady(answer) == steady(await over_http(http, "GET", path)), path
    assert (await rpc.call("GET", f"kernels/{kernel}/executions/lat%65st"))[0] == 200
    assert (await rpc.call("GET", "kernels/%FF"))[0] == 400  # not UTF-8, as tornado says


async def test_there_is_no_channel_route(gateway: GatewayProcess) -> None:
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(
            ws_url(gateway, "channel"), additional_headers=gateway.headers
        ):
            pass
    assert refused.value.response.status_code == 404


async def test_a_long_poll_does_not_hold_the_other_calls(rpc: Rpc, kernel: str, gate: Gate) -> None:
    path = f"kernels/{kernel}/executions"
    status, started = await rpc.call("POST", path, body={"code": gate.wait})
    assert status == 201
    execution = f"{path}/{started['execution']['number']}"
    waiting = await rpc.send({"method": "GET", "path": execution, "query": {"wait": "60"}})
    now = await rpc.send({"method": "GET", "path": execution})  # answered while the other waits
    answer = await rpc.receive()
    assert (answer["id"], answer["body"]["returned"]) == (now, "timeout")
    gate.open()
    answer = await rpc.receive()
    assert (answer["id"], answer["body"]["returned"]) == (waiting, "final")


@pytest.mark.parametrize(
    ("message", "status", "words"),
    [
        ("not json", 400, "must be JSON"),
        (json.dumps([1]), 400, "integer id"),
        (json.dumps({"method": "GET", "path": "info"}), 400, "integer id"),
        (json.dumps({"id": 5}), 400, "method and path"),
        (json.dumps({"id": 5, "method": "RUN", "path": "info"}), 400, "method must be one of"),
        (json.dumps({"id": 5, "method": "GET", "path": 3}), 400, "path must be a string"),
        (json.dumps({"id": 5, "method": "GET", "path": "info?x=1"}), 400, "query apart"),
        (json.dumps({"id": 5, "method": "GET", "path": "info", "query": [1]}), 400,
         "query must be an object"),
        (json.dumps({"id": 5, "method": "GET", "path": "info", "query": {"a": [1]}}), 400,
         "query must be an object"),
        (json.dumps({"id": 5, "method": "POST", "path": "kernels", "body": [1]}), 400,
         "must be a JSON object"),
        # The first shape of call, which no client sends: refused as any message without both.
        (json.dumps({"id": 5, "call": "submit", "kernel": "k", "args": {"code": "1"}}), 400,
         "method and path"),
        (json.dumps({"id": 5, "call": "follow", "kernel": "k", "execution": "current"}), 400,
         "method and path"),
        (json.dumps({"id": 5, "method": "POST", "path": "kernels/nope/executions",
                     "body": {"code": "1"}}), 404, "no kernel named 'nope'"),
    ],
)  # fmt: skip
async def test_bad_messages_are_refused_in_one_sentence(
    rpc: Rpc, message: str, status: int, words: str
) -> None:
    await rpc.ws.send(message)
    answer = await rpc.receive()
    assert (answer["status"], answer["body"]["error"]) == (status, wire_code(status))
    assert words in answer["body"]["message"]
    assert answer["body"]["message"].count(". ") == 0  # one sentence
    assert answer["id"] == (5 if '"id": 5' in message else -1)


def wire_code(status: int) -> str:
    """Return the error code of a refusal's status in the table above."""
    return {400: "bad_request", 404: "not_found"}[status]


@pytest.mark.parametrize("credential", ["wrong", "monitor"])
async def test_the_upgrade_needs_the_full_token(gateway: GatewayProcess, credential: str) -> None:
    token = gateway.monitor_token if credential == "monitor" else "wrong"
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(
            ws_url(gateway), additional_headers={"Authorization": f"token {token}"}
        ):
            pass
    assert refused.value.response.status_code == 403


READ_ONLY_AUTHORIZER = """
from jupyter_server.auth.authorizer import Authorizer


class ReadOnly(Authorizer):
    def is_authorized(self, handler, user, action, resource):
        return action != "write"
"""


async def test_each_call_is_authorized_as_over_http(tmp_path: Path) -> None:
    (tmp_path / "modules").mkdir()
    (tmp_path / "modules" / "read_only_authorizer.py").write_text(READ_ONLY_AUTHORIZER)
    config = tmp_path / "jupyter"
    config.mkdir()
    settings = {"ServerApp": {"authorizer_class": "read_only_authorizer.ReadOnly"}}
    (config / "loomgate_gateway_config.json").write_text(json.dumps(settings))
    env = {"PYTHONPATH": str(tmp_path / "modules"), "JUPYTER_CONFIG_DIR": str(config)}
    gateway = GatewayProcess(tmp_path / "state", env=env)
    try:
        gateway.start()
        async with (
            httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers, timeout=60) as http,
            websockets.connect(ws_url(gateway), additional_headers=gateway.headers) as ws,
        ):
            rpc = Rpc(ws)
            refused = ("POST", "kernels", None, {"name": "written"})
            answer = await rpc.call(*refused)
            assert answer == await over_http(http, *refused)
            assert answer == (
                403,
                {
                    "message": "User is not authorized to write on resource: kernels.",
                    "reason": None,
                },
            )
            submit = ("POST", "kernels/k/executions", None, {"code": "1"})
            assert (await rpc.call(*submit))[0] == 403  # a submit writes
            info = await rpc.call("GET", "info")
            assert steady(info) == steady(await over_http(http, "GET", "info"))
    finally:
        gateway.stop()


async def test_a_fault_of_the_gateway_is_a_logged_500_over_both(
    gateway: GatewayProcess, rpc: Rpc, http: httpx.AsyncClient, kernel: str
) -> None:
    code = "from IPython.display import HTML, display; display(HTML('<i>x</i>'))"
    r = await http.post(f"{API}/kernels/{kernel}/executions", json={"code": code, "wait": 30})
    number = r.json()["execution"]["number"]
    [bundle] = gateway.state_dir.glob(f"**/{kernel}/{number}/rich/0.json")
    bundle.unlink()  # the record says it is there: reading it is the gateway's own failure
    path = f"kernels/{kernel}/executions/{number}/rich/0"
    failed = (500, {"error": "internal", "message": "the gateway failed (FileNotFoundError)"})
    assert await rpc.call("GET", path) == failed
    assert await over_http(http, "GET", path) == failed
    log = (gateway.state_dir / "gateway.log").read_text()
    assert "loomgate: GET kernels/{ref}/executions/{selector}/rich/{index} failed" in log
