"""The channel (/api/loomgate/channel) driven by a standard websocket client: the same answers
as HTTP gives, calls answered by id as they finish, refusals, and the server's auth."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import websockets

from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess


@pytest.fixture
async def channel(gateway: GatewayProcess) -> AsyncIterator[Any]:
    """A websocket open on the gateway's channel with its token."""
    url = gateway.url.replace("http", "ws", 1) + "/api/loomgate/channel"
    async with websockets.connect(url, additional_headers=gateway.headers) as ws:
        yield ws


async def call(ws: Any, message: dict[str, Any]) -> dict[str, Any]:
    """Send one call and return its answer (the next message)."""
    await ws.send(json.dumps(message))
    return json.loads(await asyncio.wait_for(ws.recv(), 60))  # type: ignore[no-any-return]


async def test_submit_and_follow_answer_as_http_does(
    channel: Any, http: httpx.AsyncClient, kernel: str
) -> None:
    args = {"code": "print('hi')\n6*7", "wait": 60, "head": 10, "client": "test"}
    answer = await call(channel, {"id": 1, "call": "submit", "kernel": kernel, "args": args})
    assert (answer["id"], answer["status"], answer["body"]["returned"]) == (1, 201, "final")
    execution = answer["body"]["execution"]
    assert [line["text"] for line in execution["output"]["head"]] == ["hi", "42"]
    number = execution["number"]
    over_http = (await http.get(f"/api/loomgate/kernels/{kernel}/executions/{number}")).json()
    follow = {"id": 2, "call": "follow", "kernel": kernel, "execution": str(number), "args": {}}
    answer = await call(channel, follow)
    assert (answer["id"], answer["status"]) == (2, 200)
    for reply in (answer["body"], over_http):
        reply["execution"].pop("silent_for")  # seconds since its last output: grows
    assert answer["body"] == over_http


async def test_a_long_poll_does_not_hold_the_other_calls(
    channel: Any, kernel: str, gate: Gate
) -> None:
    submit = {"id": 1, "call": "submit", "kernel": kernel, "args": {"code": gate.wait}}
    started = await call(channel, submit)
    number = str(started["body"]["execution"]["number"])
    waiting = {"call": "follow", "kernel": kernel, "execution": number, "args": {"wait": 60}}
    await channel.send(json.dumps({"id": 2, **waiting}))
    now = {"id": 3, "call": "follow", "kernel": kernel, "execution": number, "args": {}}
    answer = await call(channel, now)  # answered while call 2 still waits
    assert (answer["id"], answer["body"]["returned"]) == (3, "timeout")
    gate.open()
    answer = json.loads(await asyncio.wait_for(channel.recv(), 60))
    assert (answer["id"], answer["body"]["returned"]) == (2, "final")


@pytest.mark.parametrize(
    ("message", "status", "error", "words"),
    [
        ("not json", 400, "bad_request", "must be JSON"),
        (json.dumps({"call": "submit"}), 400, "bad_request", "integer id"),
        (json.dumps({"id": 5, "call": "run", "kernel": "k"}), 400, "bad_request", "unknown call"),
        (json.dumps({"id": 5, "call": "follow", "kernel": "k"}), 400, "bad_request", "execution"),
        (json.dumps({"id": 5, "call": "submit", "kernel": "nope", "args": {"code": "1"}}), 404,
         "not_found", "no kernel named 'nope'"),
    ],
)  # fmt: skip
async def test_bad_calls_are_refused_in_one_sentence(
    channel: Any, message: str, status: int, error: str, words: str
) -> None:
    await channel.send(message)
    answer = json.loads(await asyncio.wait_for(channel.recv(), 60))
    assert (answer["status"], answer["body"]["error"]) == (status, error)
    assert words in answer["body"]["message"]
    assert answer["id"] == (5 if '"id": 5' in message else -1)


async def test_bad_arguments_are_refused_as_over_http(channel: Any, kernel: str) -> None:
    args = {"code": "1", "wait": "soon"}
    answer = await call(channel, {"id": 1, "call": "submit", "kernel": kernel, "args": args})
    assert (answer["status"], answer["body"]["error"]) == (400, "bad_request")
    assert answer["body"]["message"] == "wait must be a number, not 'soon'"


@pytest.mark.parametrize("credential", ["wrong", "monitor"])
async def test_the_channel_needs_the_full_token(gateway: GatewayProcess, credential: str) -> None:
    token = gateway.monitor_token if credential == "monitor" else "wrong"
    url = gateway.url.replace("http", "ws", 1) + "/api/loomgate/channel"
    with pytest.raises(websockets.InvalidStatus) as refused:
        async with websockets.connect(url, additional_headers={"Authorization": f"token {token}"}):
            pass
    assert refused.value.response.status_code == 403
