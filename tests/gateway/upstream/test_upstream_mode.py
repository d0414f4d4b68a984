"""Upstream mode: a local gateway whose kernels run on a stock Jupyter Server or Kernel Gateway,
every execution recorded here as for a local kernel, and every failure said plainly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cells import run
from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess, free_port
from tests.support.kernel_ws import KernelWebsocket
from tests.support.sse import events, next_event
from tests.support.upstreams import UpstreamProcess, upstream_gateway

API = "/api/loomgate"


@pytest.fixture(scope="module")
def recorder(
    upstream: UpstreamProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """A gateway in upstream mode on `upstream`, with its token."""
    state = tmp_path_factory.mktemp("gw") / "state"
    gateway = upstream_gateway(state, upstream.url, upstream.token)
    try:
        yield gateway.start()
    finally:
        gateway.stop()


@pytest.fixture
async def kernel(http: httpx.AsyncClient) -> AsyncIterator[str]:
    """A kernel started through the gateway on the upstream (stopped afterwards)."""
    r = await http.post(f"{API}/kernels", json={})
    assert r.status_code == 201, r.text
    kernel_id = str(r.json()["kernel"]["id"])
    try:
        yield kernel_id
    finally:
        await http.delete(f"{API}/kernels/{kernel_id}")


async def lines(
    http: httpx.AsyncClient, kernel: str, number: int, stream: str, span: str = "1:"
) -> list[str]:
    """Return the text of lines `span` of one stream of execution `number`."""
    r = await http.get(
        f"{API}/kernels/{kernel}/executions/{number}/streams/{stream}", params={"lines": span}
    )
    assert r.status_code == 200, r.text
    return [line["text"] for line in r.json()["lines"]]


async def ended(stream: AsyncIterator[dict[str, Any]], number: int, state: str) -> None:
    """Return once the event stream says execution `number` is in `state`."""
    while True:
        event = await next_event(stream, "execution")
        if (event["execution"]["number"], event["execution"]["state"]) == (number, state):
            return


async def test_cells_on_the_upstream_are_recorded_here(
    http: httpx.AsyncClient, kernel: str, upstream: UpstreamProcess
) -> None:
    assert kernel in upstream.kernels()  # the kernel runs there
    first = await run(http, kernel, "data = [n * n for n in range(1000)]\nfor n in data: print(n)")
    assert (first["number"], first["state"]) == (1, "completed")
    assert first["streams"]["stdout"]["lines"] == 1000
    error = await run(http, kernel, "import sys\nprint('to stderr', file=sys.stderr)\n1/0")
    assert (error["number"], error["state"]) == (2, "error")
    assert await lines(http, kernel, 2, "stderr") == ["to stderr"]
    assert (await lines(http, kernel, 2, "traceback"))[-1] == "ZeroDivisionError: division by zero"
    assert await lines(http, kernel, 1, "stdout", "-2:") == ["996004", "998001"]
    r = await http.get(
        f"{API}/kernels/{kernel}/search",
        params={"query": r"^9980\d\d$", "mode": "regex", "execution": "all"},
    )
    assert r.status_code == 200, r.text
    found = [(g["execution"], [line["text"] for line in g["lines"]]) for g in r.json()["groups"]]
    assert found == [(1, ["998001"])]
    info = (await http.get(f"{API}/info")).json()
    assert "python3" in info["kernel_specs"]


async def test_input_and_interrupt_reach_the_upstream_kernel(
    http: httpx.AsyncClient, kernel: str, gate: Gate
) -> None:
    asked = await run(http, kernel, "name = input('who? ')\nprint('hello', name)", wait=5)
    assert asked["state"] == "awaiting_input", asked
    r = await http.post(
        f"{API}/kernels/{kernel}/executions/{asked['number']}/input", json={"value": "ada"}
    )
    assert r.status_code == 200, r.text
    r = await http.get(f"{API}/kernels/{kernel}/executions/{asked['number']}", params={"wait": 30})
    assert r.json()["execution"]["state"] == "completed", r.text
    done = await run(http, kernel, "name")
    assert await lines(http, kernel, asked["number"], "stdout") == ["hello ada"]
    assert await lines(http, kernel, done["number"], "result") == ["'ada'"]
    async with events(http, kernel) as stream:
        running = await run(http, kernel, f"print('waiting', flush=True)\n{gate.wait}", wait=0)
        await next_event(stream, "output", number=running["number"])
        r = await http.post(f"{API}/kernels/{kernel}/interrupt")
        assert r.status_code == 200, r.text
        await ended(stream, running["number"], "interrupted")


async def test_a_reset_restarts_on_the_upstream_and_keeps_the_history(
    http: httpx.AsyncClient, kernel: str, upstream: UpstreamProcess
) -> None:
    await run(http, kernel, "x = 1\nprint('before')")
    r = await http.post(f"{API}/kernels/{kernel}/reset")
    assert r.status_code == 200, r.text
    after = await run(http, kernel, "'x' in dir()")
    assert after["number"] == 2  # the numbering goes on
    assert await lines(http, kernel, 2, "result") == ["False"]  # the state is gone
    assert await lines(http, kernel, 1, "stdout") == ["before"]
    assert kernel in upstream.kernels()


async def test_a_kernel_started_on_the_upstream_is_attached_by_its_id(
    http: httpx.AsyncClient, upstream: UpstreamProcess
) -> None:
    kernel_id = upstream.start_kernel()
    try:
        async with KernelWebsocket(upstream.url, upstream.token, kernel_id, binary=False) as ws:
            await ws.run("shared = 'set before loomgate came'")
        listing = (await http.get(f"{API}/kernels")).json()
        assert kernel_id in [k["id"] for k in listing["unattached"]]  # listed, not recorded yet
        assert kernel_id not in [k["id"] for k in listing["kernels"]]
        r = await http.get(f"{API}/kernels/{kernel_id[:8]}")
        assert r.status_code == 200, r.text
        attached = r.json()["kernel"]
        listing = (await http.get(f"{API}/kernels")).json()
        assert kernel_id not in [k["id"] for k in listing["unattached"]]
        assert (attached["id"], attached["alive"]) == (kernel_id, True)
        assert attached["attached"] is not None  # its records start now, and it says so
        seen = await run(http, kernel_id, "print(shared)")
        assert seen["number"] == 2  # IPython's count: the first cell ran before the attach
        assert await lines(http, kernel_id, 2, "stdout") == ["set before loomgate came"]
        # A cell another client runs on the upstream is recorded too.
        async with events(http, kernel_id) as stream:
            async with KernelWebsocket(upstream.url, upstream.token, kernel_id, binary=False) as ws:
                await ws.run("print('from elsewhere')")
            await ended(stream, 3, "completed")
        assert await lines(http, kernel_id, 3, "stdout") == ["from elsewhere"]
    finally:
        await http.delete(f"{API}/kernels/{kernel_id}")
    assert kernel_id not in upstream.kernels()  # stop_kernel stops it there


async def test_a_kernel_deleted_on_the_upstream_ends_with_the_reason(
    http: httpx.AsyncClient, upstream: UpstreamProcess, gate: Gate
) -> None:
    r = await http.post(f"{API}/kernels", json={})
    kernel_id = r.json()["kernel"]["id"]
    running = await run(http, kernel_id, gate.wait, wait=0)
    async with events(http, kernel_id) as stream:
        upstream.delete_kernel(kernel_id)
        gone = await next_event(stream, "kernel", kernel_id=kernel_id, phase="stopped")
    assert "no longer on the upstream" in gone["reason"], gone
    r = await http.get(f"{API}/kernels/{kernel_id}")
    assert "no longer on the upstream" in r.json()["kernel"]["end_reason"], r.text
    r = await http.get(f"{API}/kernels/{kernel_id}/executions/{running['number']}")
    record = r.json()["execution"]
    # The upstream's shutdown interrupts the running cell first when it can (the kernel then
    # replies KeyboardInterrupt); else the record ends `died` with the reason.
    assert record["state"] in ("interrupted", "died"), record
    if record["state"] == "died":
        assert "no longer on the upstream" in record["died"]["reason"]


async def test_a_wrong_token_and_an_unreachable_upstream_are_said_plainly(
    tmp_path: Path, upstream: UpstreamProcess
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    cases = [
        (upstream.url, "not-the-token", "refused the token in $LOOMGATE_TEST_UPSTREAM_TOKEN"),
        (closed, upstream.token, f"the upstream at {closed} refused the connection"),
    ]
    for number, (url, token, said) in enumerate(cases):
        gateway = upstream_gateway(tmp_path / f"state-{number}", url, token)
        try:
            gateway.start()
            async with httpx.AsyncClient(
                base_url=gateway.url, headers=gateway.headers, timeout=60
            ) as http:
                r = await http.post(f"{API}/kernels", json={})
                assert r.status_code == 503, r.text
                assert said in r.json()["message"], r.text
                assert token not in r.text
        finally:
            gateway.stop()
        log = (tmp_path / f"state-{number}.stderr").read_text()
        assert token not in log
