"""Every reply and event a real gateway sends conforms to its type in shared/wire.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from loomgate.shared import events as event_wire
from loomgate.shared import wire
from tests.support.cells import PNG
from tests.support.sse import decode, events, next_event
from tests.support.wire_check import mismatches

API = "/api/loomgate"
CELL = f"""
import base64, sys
from IPython.display import Image, display
print("out")
print("err", file=sys.stderr)
display(Image(data=base64.b64decode("{PNG}")))
42
"""


def conforms(value: Any, shape: Any) -> None:
    """Fail with every place where `value` departs from `shape`."""
    problems = mismatches(value, shape)
    assert not problems, problems


@pytest.mark.parametrize(
    ("value", "shape", "broken"),
    [
        ({"n": 1, "text": "a"}, wire.Line, False),
        ({"n": 1, "text": "a", "kind": "stdout", "start": True}, wire.Line, False),
        ({"n": 1}, wire.Line, True),  # a required key missing
        ({"n": 1, "text": "a", "colour": "red"}, wire.Line, True),  # an unknown key
        ({"n": "1", "text": "a"}, wire.Line, True),  # a wrong type
        ({"n": 1, "text": "a", "kind": "blue"}, wire.Line, True),  # not one of the literals
        ({"lines": 3, "bytes": 10}, wire.StreamSize, False),
        ({"lines": True, "bytes": 10}, wire.StreamSize, True),  # a bool is not an integer
    ],
)
def test_the_checker_finds_departures(value: Any, shape: Any, broken: bool) -> None:
    assert bool(mismatches(value, shape)) is broken


async def test_every_reply_conforms(http: httpx.AsyncClient) -> None:
    conforms((await http.get(f"{API}/info")).json(), wire.Info)
    created = await http.post(f"{API}/kernels", json={"name": "wire-contract"})
    conforms(created.json(), wire.KernelCreated)
    kernel = f"{API}/kernels/wire-contract"
    try:
        async with events(http, "wire-contract") as stream:
            submitted = await http.post(
                f"{kernel}/executions", json={"code": CELL, "wait": 30, "head": 10, "tail": 10}
            )
            conforms(submitted.json(), wire.ExecutionReply)
            assert submitted.json()["execution"]["state"] == "completed"
            conforms(await next_event(stream, "output"), event_wire.OutputEvent)
            conforms(await next_event(stream, "execution"), event_wire.ExecutionEvent)
        conforms((await http.get(kernel)).json(), wire.KernelReply)
        listed = await http.get(f"{API}/kernels", params={"all": "true"})
        conforms(listed.json(), wire.KernelList)
        polled = await http.get(f"{kernel}/executions/1?wait=1&tail=3")
        conforms(polled.json(), wire.ExecutionReply)
        conforms((await http.get(f"{kernel}/executions")).json(), wire.ExecutionList)
        for stream_name in wire.STREAMS:
            read = await http.get(f"{kernel}/executions/1/streams/{stream_name}?max_chars=2")
            conforms(read.json(), wire.StreamRead)
        conforms((await http.get(f"{kernel}/executions/1/rich/0")).json(), wire.RichBundle)
        found = await http.get(f"{kernel}/search", params={"query": "o", "context": 1})
        conforms(found.json(), wire.SearchReply)
        assert found.json()["matches"] > 0

        asking = await http.post(f"{kernel}/executions", json={"code": "input('? ')", "wait": 30})
        conforms(asking.json(), wire.ExecutionReply)
        answered = await http.post(f"{kernel}/executions/current/input", json={"value": "x"})
        conforms(answered.json(), wire.ExecutionOnly)
        assert (await http.get(f"{kernel}/executions/current?wait=30")).json()[
            "returned"
        ] == "final"

        sleeping = {"code": "import time; time.sleep(60)"}
        assert (await http.post(f"{kernel}/executions", json=sleeping)).status_code == 201
        refusal = (await http.post(f"{kernel}/executions", json={"code": "1"})).json()
        # A refusal's details vary with its code; the code and the sentence are always there.
        conforms({k: refusal[k] for k in ("error", "message")}, wire.Refusal)
        conforms((await http.post(f"{kernel}/interrupt")).json(), wire.ExecutionOnly)
        ended = (await http.get(f"{kernel}/executions/current?wait=30")).json()
        assert ended["execution"]["state"] == "interrupted"
        assert (await http.post(f"{kernel}/executions", json=sleeping)).status_code == 201
        async with events(http, "wire-contract") as stream:
            reset = await http.post(f"{kernel}/reset")
            conforms(reset.json(), wire.ResetReply)
            assert reset.json()["killed"] is not None
            conforms(await next_event(stream, "kernel", phase="ready"), event_wire.KernelEvent)
    finally:
        stopped = await http.delete(kernel)
    conforms(stopped.json(), wire.KernelReply)


async def test_events_conform(http: httpx.AsyncClient) -> None:
    created = (await http.post(f"{API}/kernels", json={"lifetime": "conversation"})).json()
    kernel_id = created["kernel"]["id"]
    try:
        async with http.stream("GET", f"{API}/events", params={"kernel": kernel_id}) as opened:
            watcher = decode(opened.aiter_lines())
            conforms(await next_event(watcher, "hello"), event_wire.HelloEvent)
            async with http.stream(
                "GET", f"{API}/events", params={"kernel": kernel_id, "hold": "true"}
            ) as held:
                assert held.status_code == 200
                conforms(await next_event(watcher, "holders", holders=1), event_wire.HoldersEvent)
            conforms(await next_event(watcher, "holders", holders=0), event_wire.HoldersEvent)
            await http.delete(f"{API}/kernels/{kernel_id}")
            conforms(await next_event(watcher, "kernel", phase="stopped"), event_wire.KernelEvent)
    finally:
        await http.delete(f"{API}/kernels/{kernel_id}")
