"""GatewayClient against real gateways: every endpoint, every refusal, TLS, and bad servers."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.hold import Hold
from tests.support.cells import texts
from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess, free_port
from tests.support.holds import wait_for_holders
from tests.support.proxies import DropProxy, self_signed_tls


@pytest.fixture
def plain_http_server() -> Iterator[str]:
    """A `python -m http.server` (no loomgate endpoints); yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(10)


async def test_info_and_kernel_lifecycle(client: GatewayClient) -> None:
    info = await client.info()
    assert info["service"] == "loomgate"
    assert "hold" in info["capabilities"]
    name = f"client-{os.getpid()}"
    reply = await client.create_kernel(name=name, cwd="/tmp", env={"DEMO": "1"})
    kernel, created = reply["kernel"], reply["created"]
    try:
        assert created and kernel["name"] == name and kernel["cwd"] == "/tmp"
        reply_again = await client.create_kernel(name=name)
        again, created_again = reply_again["kernel"], reply_again["created"]
        assert not created_again and again["id"] == kernel["id"]
        assert (await client.get_kernel(name))["id"] == kernel["id"]
        assert (await client.get_kernel(kernel["id"][:8]))["name"] == name
        listed = await client.list_kernels()
        assert kernel["id"] in {k["id"] for k in listed}
    finally:
        gone = await client.stop_kernel(name)
    assert gone["state"] == "gone" and not gone["alive"]
    assert kernel["id"] not in {k["id"] for k in await client.list_kernels()}
    everything = await client.list_kernels(all=True)
    assert kernel["id"] in {k["id"] for k in everything}
    with pytest.raises(GatewayError) as refused:
        await client.interrupt(kernel["id"])
    assert refused.value.code == "unavailable"
    assert refused.value.details["kernel_id"] == kernel["id"]
    assert refused.value.status == 503


async def test_submit_read_search_rich(client: GatewayClient, kid: str) -> None:
    code = "for i in range(30): print('line', i)"
    response = await client.submit(kid, code, wait=30, head=3, tail=2)
    assert response["returned"] == "final"
    execution = response["execution"]
    number = execution["number"]
    assert execution["state"] == "completed"
    assert texts(execution["output"]["head"]) == ["line 0", "line 1", "line 2"]
    assert texts(execution["output"]["tail"]) == ["line 28", "line 29"]
    assert execution["output"]["omitted"] == 25

    part = await client.read(kid, number, lines="5:7", max_chars=4)
    assert (part["first"], part["last"], part["total"]) == (5, 7, 30)
    assert texts(part["lines"]) == ["line"] * 3
    assert part["lines"][0]["clipped"] == 2
    tail = await client.read(kid, "latest", stream="stdout", lines="-2:")
    assert texts(tail["lines"]) == ["line 28", "line 29"]
    with pytest.raises(GatewayError) as bad_range:
        await client.read(kid, number, lines="5:2")
    assert bad_range.value.code == "bad_request"

    found = await client.search(kid, r"line (1|2)$", selector=number, context=1)
    assert found["mode"] == "literal or regex" and found["matches"] == 2
    assert [line["marker"] for line in found["groups"][0]["lines"]] == ["C", "M", "M", "C"]
    everywhere = await client.search(kid, "LINE 29", selector="all", ignore_case=True)
    assert everywhere["matches"] == 1

    assert (await client.executions(kid))[-1]["number"] == number
    assert await client.executions(kid, since=number) == []

    with pytest.raises(GatewayError) as missing:
        await client.rich(kid, number, 0)
    assert missing.value.code == "not_found"
    with pytest.raises(GatewayError) as unknown:
        await client.execution(kid, number + 50)
    assert unknown.value.code == "not_found"
    assert unknown.value.details["last"] == number

    shown = await client.submit(kid, "from IPython.display import HTML\nHTML('<b>x</b>')", wait=30)
    bundle = await client.rich(kid, shown["execution"]["number"], 0)
    assert bundle["data"]["text/html"] == "<b>x</b>"


async def test_long_poll_busy_interrupt(client: GatewayClient, kid: str, gate: Gate) -> None:
    started = await client.submit(kid, f"print('go', flush=True)\n{gate.wait}")
    number = started["execution"]["number"]
    assert started["returned"] == "timeout"
    assert started["execution"]["state"] == "running"
    with pytest.raises(GatewayError) as busy:
        await client.submit(kid, "1")
    assert busy.value.code == "busy"
    assert busy.value.status == 409
    assert busy.value.details["running"] == number
    named = re.fullmatch(
        r"kernel is busy running execution (\d+); wait for it, or interrupt it", str(busy.value)
    )
    assert named is not None and int(named[1]) == number, str(busy.value)

    silent = await client.execution(kid, wait=10, until_silent=0.3, tail=1)
    assert silent["returned"] == "silent"
    output = silent["execution"]["output"]
    assert texts(output["head"] + output["tail"]) == ["go"]

    interrupted = await client.interrupt(kid)
    assert interrupted["number"] == number
    ended = await client.execution(kid, number, wait=10)
    assert ended["returned"] == "final"
    assert ended["execution"]["state"] == "interrupted"
    with pytest.raises(GatewayError) as nothing:
        await client.interrupt(kid)
    assert nothing.value.code == "conflict"


async def test_long_poll_until_final(client: GatewayClient, kid: str, gate: Gate) -> None:
    started = await client.submit(kid, f"{gate.wait}\nprint('done')")
    assert started["returned"] == "timeout"
    assert started["execution"]["state"] == "running"
    gate.open()
    ended = await client.execution(kid, started["execution"]["number"], wait=30, head=5)
    assert ended["returned"] == "final"
    assert texts(ended["execution"]["output"]["head"]) == ["done"]


async def test_send_input_and_reset(client: GatewayClient, kid: str) -> None:
    waiting = await client.submit(kid, "name = input('Your name? ')\nprint('hello', name)", wait=30)
    assert waiting["returned"] == "input"
    assert waiting["execution"]["input"] == {"prompt": "Your name? ", "password": False}
    answered = await client.send_input(kid, "current", "Ada")
    assert answered["state"] in ("running", "completed")
    done = await client.execution(kid, waiting["execution"]["number"], wait=30, head=5)
    assert texts(done["execution"]["output"]["head"]) == ["hello Ada"]
    with pytest.raises(GatewayError) as not_waiting:
        await client.send_input(kid, "current", "again")
    assert not_waiting.value.code == "conflict"

    await client.submit(kid, "import time\ntime.sleep(30)")
    reset = await client.reset(kid)
    assert reset["killed"]["state"] == "killed"
    assert reset["kernel"]["alive"]
    after = await client.submit(kid, "'name' in dir()", wait=30, head=1)
    assert texts(after["execution"]["output"]["head"]) == ["False"]
    assert after["execution"]["number"] > reset["killed"]["number"]


async def test_unreachable_never_shows_the_token() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with GatewayClient(url, "sekrit-token-123") as c:
        with pytest.raises(GatewayError) as down:
            await c.info()
    assert down.value.code == "unreachable"
    assert down.value.status is None
    assert str(down.value) == (
        f"cannot reach the gateway at {url} (connection refused); "
        "is it running? `loomgate gateway start` starts one on this machine"
    )
    assert "sekrit" not in str(down.value) and "sekrit" not in repr(down.value)
    assert "sekrit" not in repr(c)


async def test_an_unreachable_gateway_says_what_to_run() -> None:
    async with GatewayClient("http://127.0.0.1:1", "t", name="far", local=True) as c:
        with pytest.raises(GatewayError) as down:
            await c.info()
    assert str(down.value).endswith(
        "(connection refused); is it running? `loomgate gateway start` starts it"
    )
    # A refused connection to another machine cannot be made here; its advice is the same text.
    remote = GatewayClient("http://gpu-box.example:8787", "t", name="gpu")
    assert remote.start_advice == (
        "is it running? Start it on its host with `loomgate gateway start` "
        "(`loomgate gateway install-service` keeps it running)"
    )
    await remote.aclose()


async def test_unknown_host_is_unreachable() -> None:
    async with GatewayClient("http://no-such-host.invalid:8787", "t") as c:
        with pytest.raises(GatewayError) as down:
            await c.info()
    assert down.value.code == "unreachable"
    assert "no-such-host.invalid" in str(down.value)


async def test_wrong_token_is_auth(gateway: GatewayProcess) -> None:
    async with GatewayClient(gateway.url, "wrong-token-456", name="lab") as c:
        with pytest.raises(GatewayError) as refused:
            await c.list_kernels()
    assert refused.value.code == "auth"
    assert refused.value.status == 403
    assert str(refused.value) == (
        f"the gateway 'lab' at {gateway.url} refused the token it was given"
    )
    assert "wrong-token" not in str(refused.value)


async def test_plain_http_server_is_protocol(plain_http_server: str) -> None:
    async with GatewayClient(plain_http_server, "t") as c:
        with pytest.raises(GatewayError) as wrong:
            await c.info()
    assert wrong.value.code == "protocol"
    assert str(wrong.value).startswith(f"{plain_http_server} is not a loomgate gateway")


async def test_slow_answer_is_timeout(client: GatewayClient, kid: str) -> None:
    await client.submit(kid, "import time\ntime.sleep(30)")
    try:
        with pytest.raises(GatewayError) as slow:
            await client.request(
                "GET", f"kernels/{kid}/executions/current", params={"wait": 5}, read_timeout=0.3
            )
        assert slow.value.code == "timeout"
        assert (
            str(slow.value) == f"the gateway 'shared' at {client.url} did not answer within 0.3 s"
        )
    finally:
        await client.interrupt(kid)


@pytest.fixture
async def tls_url(gateway: GatewayProcess, tmp_path: Path) -> AsyncIterator[str]:
    """Yield the https:// URL of a TLS proxy (self-signed) in front of the test gateway."""
    proxy = DropProxy(gateway.port, tls=self_signed_tls(tmp_path))
    try:
        yield await proxy.start()
    finally:
        await proxy.close()


async def test_tls_gateway_requests_and_hold(
    tls_url: str, gateway: GatewayProcess, client: GatewayClient
) -> None:
    """https:// gateways go through httpx: requests, a cell, and a hold's event stream."""
    async with GatewayClient(tls_url, gateway.token, verify=False) as secure:
        assert (await secure.info())["service"] == "loomgate"
        kernel = (await secure.create_kernel(lifetime="conversation"))["kernel"]
        try:
            async with Hold(secure, kernel["id"]):
                await wait_for_holders(client, kernel["id"], 1)
                done = await secure.submit(kernel["id"], "6 * 7", wait=30, head=5)
                assert done["execution"]["state"] == "completed"
                assert texts(done["execution"]["output"]["head"]) == ["42"]
            await wait_for_holders(client, kernel["id"], 0)
        finally:
            await client.stop_kernel(kernel["id"])


async def test_tls_gateway_with_an_untrusted_certificate(
    tls_url: str, gateway: GatewayProcess
) -> None:
    async with GatewayClient(tls_url, gateway.token) as secure:
        with pytest.raises(GatewayError) as refused:
            await secure.info()
    assert refused.value.code == "unreachable"
    assert "TLS: self-signed certificate" in str(refused.value)
    assert "verify = false" in str(refused.value)
