"""GatewayClient against real gateways: every endpoint, every refusal, holds, and bad servers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from loomgate.translator.gateway_client import GatewayClient, GatewayError
from tests.gateways import GatewayProcess, free_port


@pytest.fixture
async def client(gateway: GatewayProcess) -> AsyncIterator[GatewayClient]:
    """A client of the shared gateway."""
    async with GatewayClient(gateway.url, gateway.token, name="shared") as c:
        yield c


@pytest.fixture
async def kid(client: GatewayClient) -> AsyncIterator[str]:
    """A fresh kernel on the shared gateway, created through the client (stopped afterwards)."""
    kernel, created = await client.create_kernel()
    assert created
    try:
        yield kernel["id"]
    finally:
        if (await client.get_kernel(kernel["id"]))["kernel"]["alive"]:
            await client.stop_kernel(kernel["id"])


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


def texts(lines: list[dict[str, Any]]) -> list[str]:
    """Return the texts of wire lines."""
    return [line["text"] for line in lines]


async def test_info_and_kernel_lifecycle(client: GatewayClient) -> None:
    info = await client.info()
    assert info["service"] == "loomgate"
    assert "hold" in info["capabilities"]
    name = f"client-{os.getpid()}"
    kernel, created = await client.create_kernel(name=name, cwd="/tmp", env={"DEMO": "1"})
    try:
        assert created and kernel["name"] == name and kernel["cwd"] == "/tmp"
        again, created_again = await client.create_kernel(name=name)
        assert not created_again and again["id"] == kernel["id"]
        assert (await client.get_kernel(name))["kernel"]["id"] == kernel["id"]
        assert (await client.get_kernel(kernel["id"][:8]))["kernel"]["name"] == name
        listed = (await client.list_kernels())["kernels"]
        assert kernel["id"] in {k["id"] for k in listed}
    finally:
        gone = (await client.stop_kernel(name))["kernel"]
    assert gone["state"] == "gone" and not gone["alive"]
    assert kernel["id"] not in {k["id"] for k in (await client.list_kernels())["kernels"]}
    everything = (await client.list_kernels(all=True))["kernels"]
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

    found = await client.search(kid, r"line (1|2)$", execution=number, context=1)
    assert found["mode"] == "regex" and found["matches"] == 2
    assert [line["marker"] for line in found["groups"][0]["lines"]] == ["C", "M", "M", "C"]
    everywhere = await client.search(kid, "LINE 29", execution="all", ignore_case=True)
    assert everywhere["matches"] == 1

    assert (await client.executions(kid))["executions"][-1]["number"] == number
    assert (await client.executions(kid, since=number))["executions"] == []

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


async def test_long_poll_busy_interrupt(client: GatewayClient, kid: str) -> None:
    started = await client.submit(kid, "import time\nprint('go', flush=True)\ntime.sleep(30)")
    number = started["execution"]["number"]
    assert started["returned"] == "timeout"
    assert started["execution"]["state"] == "running"
    with pytest.raises(GatewayError) as busy:
        await client.submit(kid, "1")
    assert busy.value.code == "busy"
    assert busy.value.status == 409
    assert busy.value.details["running"] == number
    assert f"execution {number}" in str(busy.value)

    silent = await client.execution(kid, wait=10, until_silent=0.3, tail=1)
    assert silent["returned"] == "silent"
    output = silent["execution"]["output"]
    assert texts(output["head"] + output["tail"]) == ["go"]

    interrupted = await client.interrupt(kid)
    assert interrupted["execution"]["number"] == number
    ended = await client.execution(kid, number, wait=10)
    assert ended["returned"] == "final"
    assert ended["execution"]["state"] == "interrupted"
    with pytest.raises(GatewayError) as nothing:
        await client.interrupt(kid)
    assert nothing.value.code == "conflict"


async def test_long_poll_until_final(client: GatewayClient, kid: str) -> None:
    started = await client.submit(kid, "import time\ntime.sleep(0.5)\nprint('done')")
    assert started["returned"] == "timeout"
    ended = await client.execution(kid, started["execution"]["number"], wait=30, head=5)
    assert ended["returned"] == "final"
    assert texts(ended["execution"]["output"]["head"]) == ["done"]


async def test_send_input_and_reset(client: GatewayClient, kid: str) -> None:
    waiting = await client.submit(kid, "name = input('Your name? ')\nprint('hello', name)", wait=30)
    assert waiting["returned"] == "input"
    assert waiting["execution"]["input"] == {"prompt": "Your name? ", "password": False}
    answered = await client.send_input(kid, "current", "Ada")
    assert answered["execution"]["state"] in ("running", "completed")
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


async def wait_for_holders(client: GatewayClient, kid: str, count: int) -> None:
    """Wait until the kernel reports `count` holders."""
    deadline = time.monotonic() + 10
    while (await client.get_kernel(kid))["kernel"]["holders"] != count:
        assert time.monotonic() < deadline, f"holders never became {count}"
        await asyncio.sleep(0.05)


async def test_hold_counts_while_open(client: GatewayClient, kid: str) -> None:
    seen: list[dict[str, Any]] = []
    completed = asyncio.Event()

    def on_event(event: dict[str, Any]) -> None:
        seen.append(event)
        if event["event"] == "execution" and event["execution"]["state"] == "completed":
            completed.set()

    async with client.hold(kid, on_event=on_event) as hold:
        assert hold.connected
        assert (await client.get_kernel(kid))["kernel"]["holders"] == 1
        await client.submit(kid, "print('hi')", wait=30)
        await asyncio.wait_for(completed.wait(), 10)
    assert seen[0]["event"] == "hello"
    assert not hold.active
    await wait_for_holders(client, kid, 0)


class DropProxy:
    """A TCP forwarder to a gateway whose open connections can all be cut at once."""

    def __init__(self, port: int, tls: ssl.SSLContext | None = None) -> None:
        self.port = port
        self.tls = tls
        self.writers: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        """Start listening (with TLS if given one); return the proxy's URL."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writers |= {writer, up_writer}

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def drop(self) -> None:
        """Cut every connection open through the proxy."""
        for writer in self.writers:
            writer.close()
        self.writers.clear()

    async def close(self) -> None:
        """Stop listening and cut every connection."""
        self.drop()
        if self.server is not None:
            self.server.close()


async def test_hold_reconnects_after_a_drop(
    gateway: GatewayProcess, client: GatewayClient, kid: str
) -> None:
    proxy = DropProxy(int(gateway.url.rsplit(":", 1)[1]))
    hellos: list[dict[str, Any]] = []
    reconnected = asyncio.Event()

    async def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "hello":
            hellos.append(event)
            if len(hellos) >= 2:
                reconnected.set()

    try:
        async with GatewayClient(await proxy.start(), gateway.token) as proxied:
            hold = proxied.hold(kid, on_event=on_event)
            async with hold:
                await wait_for_holders(client, kid, 1)
                proxy.drop()
                await asyncio.wait_for(reconnected.wait(), 10)  # the hold reconnected
                assert hold.connected
                await wait_for_holders(client, kid, 1)
            await wait_for_holders(client, kid, 0)
    finally:
        await proxy.close()


async def test_hold_on_unknown_kernel_fails(client: GatewayClient) -> None:
    with pytest.raises(GatewayError) as missing:
        await client.hold("no-such-kernel").open()
    assert missing.value.code == "not_found"


async def test_client_close_releases_holds(gateway: GatewayProcess, client: GatewayClient) -> None:
    kernel, _ = await client.create_kernel(lifetime="conversation")
    try:
        other = GatewayClient(gateway.url, gateway.token)
        await other.hold(kernel["id"]).open()
        await wait_for_holders(client, kernel["id"], 1)
        await other.aclose()
        await wait_for_holders(client, kernel["id"], 0)
    finally:
        await client.stop_kernel(kernel["id"])


async def test_unreachable_never_shows_the_token() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with GatewayClient(url, "sekrit-token-123") as c:
        with pytest.raises(GatewayError) as down:
            await c.info()
    assert down.value.code == "unreachable"
    assert down.value.status is None
    assert (
        str(down.value) == f"cannot reach the gateway at {url} (connection refused); is it running?"
    )
    assert "sekrit" not in str(down.value) and "sekrit" not in repr(down.value)
    assert "sekrit" not in repr(c)


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
        f"the gateway 'lab' at {gateway.url} refused the token; "
        "check LOOMGATE_TOKEN / token_env for this gateway"
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
            await client._request(
                "GET", f"kernels/{kid}/executions/current", params={"wait": 5}, read_timeout=0.3
            )
        assert slow.value.code == "timeout"
        assert (
            str(slow.value) == f"the gateway 'shared' at {client.url} did not answer within 0.3 s"
        )
    finally:
        await client.interrupt(kid)


def self_signed_tls(directory: Path) -> ssl.SSLContext:
    """Return a server TLS context with a fresh self-signed certificate for 127.0.0.1."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ip_address("127.0.0.1"))]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context


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
        kernel, _ = await secure.create_kernel(lifetime="conversation")
        try:
            async with secure.hold(kernel["id"]) as hold:
                assert hold.connected
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
