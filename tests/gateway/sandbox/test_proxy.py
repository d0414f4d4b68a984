"""The kernel's proxy with the bridge in front of it, as a confined kernel's clients reach it:
httpx, urllib, curl (HTTP and SOCKS), pip and raw SOCKS5, against servers on 127.0.0.1 that
the tests start. 127.0.0.1 is reachable only when a policy names it, so `true` shows the
refusals, with their sentence, on traffic to 127.0.0.1 only; other ranges are the decision's
(test_network_rules.py). The host's own public address is refused in a network namespace of the
test's own, which has only a loopback with that address on it; a name a list does not name is
never resolved, and no refusal tells what a name resolved to. What a sandbox hands over on the
unix socket: a TCP socket is served, anything else is closed with no fd left in the gateway; a
handed socket made blocking by a copy kept in the sandbox never stops the proxy; no more than
MAX_CONNECTIONS live at once."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import http.server
import os
import shutil
import socket
import ssl
import stat
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from loomgate.gateway.sandbox.network import proxy as proxy_module
from loomgate.gateway.sandbox.network import relay
from loomgate.gateway.sandbox.network.network_rules import NetworkPolicy, parse_network
from loomgate.gateway.sandbox.network.proxy import KernelProxy, Resolver
from tests.support.bridges import (
    echo_server,
    file_server,
    hand_over,
    open_fds,
    running_bridge,
    served,
    short_dir,
)
from tests.support.proxies import self_signed_tls

LOOPBACK = "127.0.0.1 is a loopback address, which profile 'workspace' does not name"
CURL = "/usr/bin/curl"


class Handler(http.server.SimpleHTTPRequestHandler):
    """Files from the origin's dir; POST answers with its body; every request head is kept."""

    protocol_version = "HTTP/1.1"
    heads: list[str]

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.heads.append(f"{self.requestline}\r\n{self.headers}")
        return parsed

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Keep-Alive", "timeout=5")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def origin(root: Path, tls: ssl.SSLContext | None = None) -> Iterator[tuple[int, list[str]]]:
    """Yield an HTTP(S) server for `root` on 127.0.0.1, its port, and the heads it got."""
    heads: list[str] = []
    handler = type("Recording", (Handler,), {"heads": heads})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=root))
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], heads
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def place() -> Iterator[Path]:
    with short_dir() as path:
        (path / "site").mkdir()
        (path / "site" / "hello.txt").write_bytes(b"hello through the proxy\n" * 1000)
        yield path


@pytest.fixture
def site(place: Path) -> Iterator[tuple[int, list[str]]]:
    with origin(place / "site") as served:
        yield served


@pytest.fixture
def echo() -> Iterator[int]:
    with served(echo_server()) as port:
        yield port


@contextlib.asynccontextmanager
async def proxied(
    place: Path, policy: NetworkPolicy, profile: str = "mine", resolver: Resolver | None = None
) -> AsyncIterator[tuple[KernelProxy, int]]:
    """Yield a proxy on a unix socket in `place` and the port of a bridge in front of it."""
    proxy = KernelProxy(policy, profile, resolver=resolver)
    path = place / f"{profile}.sock"
    await proxy.start_unix(path)
    try:
        with running_bridge(path) as (_, port):
            yield proxy, port
    finally:
        await proxy.close()


async def curl(*args: str) -> tuple[int, str, str]:
    """Run curl; return its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        CURL, "-sS", "--max-time", "20", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def socks_connect(port: int, kind: int, address: bytes, to: int) -> tuple[int, Any]:
    """Do a raw SOCKS5 CONNECT through the bridge at `port`; return the reply's code and the
    open streams."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"\x05\x02\x00\x02")  # offers: no authentication, user/password
    assert await reader.readexactly(2) == b"\x05\x00"
    writer.write(bytes([5, 1, 0, kind]) + address + to.to_bytes(2, "big"))
    version, code, _, bound = await reader.readexactly(4)
    assert version == 5
    await reader.readexactly({1: 4, 4: 16}[bound] + 2)
    return code, (reader, writer)


async def test_httpx_urllib_and_curl_reach_a_named_server(place: Path, site: Any) -> None:
    port, heads = site
    url = f"http://127.0.0.1:{port}/hello.txt"
    body = (place / "site" / "hello.txt").read_bytes()
    async with proxied(place, parse_network(["127.0.0.1"])) as (proxy, bridge):
        via = f"http://127.0.0.1:{bridge}"
        async with httpx.AsyncClient(proxy=via, trust_env=False) as http:
            assert (await http.get(url)).content == body
            posted = await http.post(f"http://127.0.0.1:{port}/echo?q=1", content=b"x" * 70000)
            assert posted.content == b"x" * 70000
            assert posted.headers["connection"] == "close"
            assert "keep-alive" not in posted.headers
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": via}))
        got = await asyncio.to_thread(lambda: opener.open(url, timeout=20).read())
        assert got == body
        for how in (["-x", via], ["-p", "-x", via], ["--socks5-hostname", f"127.0.0.1:{bridge}"]):
            assert await curl(*how, url) == (0, body.decode(), "")
        assert proxy.refusals_since(0) == []
    # The origin got origin-form requests without the proxy's headers, each asking to close.
    forwarded = [head for head in heads if "POST" in head]
    assert forwarded[0].startswith("POST /echo?q=1 HTTP/1.1\r\n")
    assert "Connection: close" in forwarded[0]
    assert "Proxy-" not in "".join(heads) and "http://" not in "".join(heads)


async def test_httpx_over_tls_through_a_connect_tunnel(place: Path) -> None:
    tls = self_signed_tls(place)
    trusted = ssl.create_default_context(cafile=place / "cert.pem")
    with origin(place / "site", tls) as (port, _):
        policy = parse_network([f"127.0.0.1:{port}"])
        async with contextlib.AsyncExitStack() as stack:
            _, bridge = await stack.enter_async_context(proxied(place, policy))
            via = f"http://127.0.0.1:{bridge}"
            http = await stack.enter_async_context(httpx.AsyncClient(proxy=via, verify=trusted))
            response = await http.get(f"https://127.0.0.1:{port}/hello.txt")
    assert response.content == (place / "site" / "hello.txt").read_bytes()


async def test_pip_downloads_a_wheel_through_the_bridge(place: Path) -> None:
    wheel = make_wheel(place / "site" / "files", "tinypkg", "1.0")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    index = place / "site" / "simple" / "tinypkg"
    index.mkdir(parents=True)
    link = f'<a href="/files/{wheel.name}#sha256={digest}">{wheel.name}</a>'
    (index / "index.html").write_text(f"<html><body>{link}</body></html>")
    with origin(place / "site") as (port, heads):

        async def pip(bridge: int, into: Path) -> tuple[int, str]:
            process = await asyncio.create_subprocess_exec(
                *[sys.executable, "-m", "pip", "download", "-vv", "--no-deps", "--isolated"],
                *["--no-cache-dir", "--disable-pip-version-check", "--retries", "0"],
                *["--index-url", f"http://127.0.0.1:{port}/simple/", "-d", str(into)],
                *["--proxy", f"http://127.0.0.1:{bridge}", "tinypkg"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
            )
            out, _ = await process.communicate()
            assert process.returncode is not None
            return process.returncode, out.decode()

        async with proxied(place, parse_network(True), "workspace") as (proxy, bridge):
            code, said = await pip(bridge, place / "refused")
            assert code != 0 and LOOPBACK in said, said
            assert proxy.refusals_since(0)
        assert heads == []  # nothing reached the origin
        async with proxied(place, parse_network(["127.0.0.1"])) as (_, bridge):
            code, said = await pip(bridge, place / "got")
            assert code == 0, said
    assert (place / "got" / wheel.name).read_bytes() == wheel.read_bytes()
    assert [h.split(" ")[1] for h in heads] == ["/simple/tinypkg/", f"/files/{wheel.name}"]


def make_wheel(where: Path, name: str, version: str) -> Path:
    """Write a pure-Python wheel of one module; return its path."""
    where.mkdir(parents=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"ANSWER = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in files.items()
    )
    wheel = where / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return wheel


async def test_under_true_loopback_is_refused_with_the_sentence(
    place: Path, site: Any, echo: int
) -> None:
    port, heads = site
    url = f"http://127.0.0.1:{port}/hello.txt"
    async with proxied(place, parse_network(True), "workspace") as (proxy, bridge):
        began = proxy.refusals_since(0)
        via = f"http://127.0.0.1:{bridge}"
        code, out, err = await curl("-v", "-x", via, url)
        assert f"< HTTP/1.1 403 {LOOPBACK}" in err
        assert out == LOOPBACK + "\n"
        code, out, err = await curl("-v", "-p", "-x", via, url)
        assert code == 56 and f"< HTTP/1.1 403 {LOOPBACK}" in err
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": via}))
        with pytest.raises(urllib.error.HTTPError) as refused:
            await asyncio.to_thread(lambda: opener.open(url, timeout=20))
        assert refused.value.code == 403 and refused.value.reason == LOOPBACK
        code, _ = await socks_connect(bridge, 1, socket.inet_aton("127.0.0.1"), echo)
        assert code == 0x02  # connection not allowed by ruleset
        code, _, err = await curl("--socks5-hostname", f"127.0.0.1:{bridge}", url)
        assert code == 97
        assert began == []
        assert [r.reason for r in proxy.refusals_since(0)] == [LOOPBACK] * 5
    assert heads == []


async def test_socks5_by_address_and_by_name_relays_and_half_closes(place: Path, echo: int) -> None:
    async with proxied(place, parse_network(["127.0.0.1", "localhost"])) as (proxy, bridge):
        for kind, address in ((1, socket.inet_aton("127.0.0.1")), (3, b"\x09localhost")):
            code, (reader, writer) = await socks_connect(bridge, kind, address, echo)
            assert code == 0x00
            writer.write(b"ping" * 100000)
            writer.write_eof()  # the echo server answers the end with "bye"
            assert await reader.read() == b"ping" * 100000 + b"bye"
            writer.close()
            await writer.wait_closed()
        code, _ = await socks_connect(bridge, 4, socket.inet_pton(socket.AF_INET6, "::1"), echo)
        assert code == 0x02  # ::1 is not named: decided, never connected
        assert [r.address for r in proxy.refusals_since(0)] == ["::1"]


@pytest.mark.parametrize("spliced", [True, False])
async def test_a_connect_tunnel_half_closes_both_ways(
    place: Path, echo: int, spliced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not spliced:
        monkeypatch.setattr(relay, "SPLICE", None)  # as where the OS has no splice
    data = os.urandom(4 << 20)
    async with proxied(place, parse_network([f"127.0.0.1:{echo}"])) as (_, bridge):
        reader, writer = await asyncio.open_connection("127.0.0.1", bridge)
        writer.write(f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\nHost: x\r\n\r\nearly".encode())
        ok = b"HTTP/1.1 200 Connection established\r\n\r\n"
        assert await reader.readuntil(b"\r\n\r\n") == ok
        writer.write(data)
        writer.write_eof()
        assert await reader.read() == b"early" + data + b"bye"
        writer.close()
        await writer.wait_closed()


async def test_an_origin_that_does_not_answer_http(place: Path, echo: int) -> None:
    with socket.create_server(("127.0.0.1", 0)) as mute:
        mute_port = mute.getsockname()[1]
        policy = parse_network(["127.0.0.1"])
        async with proxied(place, policy) as (_, bridge):
            reader, writer = await asyncio.open_connection("127.0.0.1", bridge)
            writer.write(f"GET http://127.0.0.1:{mute_port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            accepted, _ = await asyncio.to_thread(mute.accept)
            request = await asyncio.to_thread(accepted.recv, 65536)
            assert request.startswith(b"GET / HTTP/1.1\r\n")
            accepted.close()  # reads the request, then closes without a word
            said = await reader.read()
            assert said.startswith(
                b"HTTP/1.1 502 the origin closed the connection without answering"
            )
            writer.close()
            # The echo server sends the request back: no response head, so the client's
            # connection ends at once rather than passing on what is not HTTP.
            code, out, _ = await curl(
                "-x", f"http://127.0.0.1:{bridge}", f"http://127.0.0.1:{echo}/"
            )
            assert code in (52, 56) and out == ""


async def test_the_address_checked_is_the_address_connected(place: Path, echo: int) -> None:
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[tuple[int, tuple[Any, ...]]]:
        asked.append(host)
        if host == "nowhere.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, ("10.0.0.5", port)), (socket.AF_INET, ("127.0.0.1", port))]

    policy = parse_network(["127.0.0.1", "two.example", "nowhere.invalid"])
    async with proxied(place, policy, resolver=resolver) as (proxy, bridge):
        code, (reader, writer) = await socks_connect(bridge, 3, b"\x0btwo.example", echo)
        assert code == 0x00  # 10.0.0.5 refused (a name reaches public addresses), 127.0.0.1 named
        writer.write_eof()
        assert await reader.read() == b"bye"
        writer.close()
        code, _ = await socks_connect(bridge, 3, b"\x0fnowhere.invalid", echo)
        assert code == 0x04
        got = await curl("-v", "-x", f"http://127.0.0.1:{bridge}", "http://nowhere.invalid/")
        assert (
            "< HTTP/1.1 502 nowhere.invalid could not be resolved: Name or service not known"
            in got[2]
        )
        assert proxy.refusals_since(0) == []  # the private address was skipped, not refused
    assert asked == ["two.example", "nowhere.invalid", "nowhere.invalid"]


async def test_under_a_list_a_name_it_does_not_name_is_never_resolved(
    place: Path, echo: int
) -> None:
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[tuple[int, tuple[Any, ...]]]:
        asked.append(host)
        return [(socket.AF_INET, ("10.0.0.5", port))]

    policy = parse_network(["pypi.org", "127.0.0.1"])
    secret = "secret-data.exfil.example.com"
    async with proxied(place, policy, resolver=resolver) as (proxy, bridge):
        via = f"http://127.0.0.1:{bridge}"
        _, _, err = await curl("-v", "-x", via, f"http://{secret}/")
        sentence = f"{secret} is not named by profile 'mine', which names pypi.org, 127.0.0.1"
        assert f"< HTTP/1.1 403 {sentence}" in err
        code, _ = await socks_connect(bridge, 3, bytes([len(secret)]) + secret.encode(), echo)
        assert code == 0x02  # connection not allowed by ruleset
        # A name it names is resolved; what it resolved to is refused, and never told.
        _, _, err = await curl("-v", "-x", via, "http://pypi.org/")
        said = (
            "pypi.org resolves to a private address; profile 'mine' names pypi.org, but a name "
            "reaches only public addresses of other hosts: name the address to reach it"
        )
        assert f"< HTTP/1.1 403 {said}" in err and "10.0.0.5" not in err
        refusals = proxy.refusals_since(0)
    assert asked == ["pypi.org"]  # the secret's name never went to a resolver
    assert [(r.destination, r.address) for r in refusals] == [
        (f"{secret}:80", None),
        (f"{secret}:{echo}", None),
        ("pypi.org:80", None),
    ]


# Run in a network namespace of its own, whose loopback also holds a public address, as a host's
# interface would: the proxy under `true`, with its own look at the host's addresses, is asked
# for a service listening on every address, by that address and by a name resolving to it.
OWN_ADDRESS = "1.2.3.4"
IN_NAMESPACE = """
import asyncio, socket, sys
from loomgate.gateway.sandbox.network.network_rules import parse_network
from loomgate.gateway.sandbox.network.proxy import KernelProxy

async def resolver(host, port):
    return [(socket.AF_INET, (sys.argv[1], port))]

async def main():
    with socket.create_server(("0.0.0.0", 0)) as service:
        port = service.getsockname()[1]
        proxy = KernelProxy(parse_network(True), "workspace", resolver=resolver)
        via = await proxy.start_tcp()
        try:
            for host in (sys.argv[1], "box.example"):
                reader, writer = await asyncio.open_connection("127.0.0.1", via)
                writer.write(f"CONNECT {host}:{port} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n".encode())
                print((await reader.readline()).decode().strip())
                writer.close()
        finally:
            await proxy.close()

asyncio.run(main())
"""


def test_the_hosts_own_public_address_is_refused() -> None:
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        pytest.skip("unshare(1) and ip(8) make the namespace; one is missing")
    setup = f'{ip} link set lo up && {ip} addr add "$2"/32 dev lo && exec "$0" -c "$1" "$2"'
    command = [unshare, "-rn", "sh", "-c", setup, sys.executable, IN_NAMESPACE, OWN_ADDRESS]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0 and "unshare failed" in done.stderr:
        pytest.skip(f"no network namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"HTTP/1.1 403 {OWN_ADDRESS} is an address of this host, which profile 'workspace' does "
        "not name",
        "HTTP/1.1 403 box.example resolves to an address of this host, which profile 'workspace' "
        "does not name",
    ]


async def test_a_closed_port_and_bad_requests_get_a_sentence(place: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    async with proxied(place, parse_network(["127.0.0.1"])) as (_, bridge):
        via = f"http://127.0.0.1:{bridge}"
        _, _, err = await curl("-v", "-x", via, f"http://127.0.0.1:{port}/")
        assert f"< HTTP/1.1 502 could not connect to 127.0.0.1:{port}: Connection refused" in err
        code, _ = await socks_connect(bridge, 1, socket.inet_aton("127.0.0.1"), port)
        assert code == 0x05
        for request, said in (
            (
                b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                b"HTTP/1.1 400 / is not an absolute http:// URL",
            ),
            (b"GET https://x/ HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 400 https://x/ is not"),
            (b"CONNECT x HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 400 x does not name a host and"),
            (b"NONSENSE\r\n\r\n", b"HTTP/1.1 400 the proxy could not read the request"),
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", bridge)
            writer.write(request)
            assert (await reader.read()).startswith(said)
            writer.close()


async def test_close_leaves_no_task_socket_or_file(place: Path, echo: int) -> None:
    with served(file_server(place)) as site:
        await leaves_nothing(place, echo, site)


async def leaves_nothing(place: Path, echo: int, site: int) -> None:
    """Serve each kind of connection, close the proxy with two still open, and check that no
    task, socket or file of its is left (the servers are processes of their own)."""
    fds = open_fds()
    proxy = KernelProxy(parse_network(["127.0.0.1"]), "mine")
    path = place / "p.sock"
    await proxy.start_unix(path)
    port = await proxy.start_tcp()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # A finished tunnel, a refused one, a forwarded request, an idle client, an open tunnel.
    for where in (("127.0.0.1", port), str(path)):
        family = socket.AF_UNIX if isinstance(where, str) else socket.AF_INET
        reader, writer = await asyncio.open_connection(sock=connected(family, where))
        writer.write(f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
        writer.write_eof()
        assert await reader.read() == b"bye"
        writer.close()
    forwarded = await curl("-x", f"http://127.0.0.1:{port}", f"http://127.0.0.1:{site}/site/")
    assert forwarded[0] == 0 and "hello.txt" in forwarded[1]
    refused = await curl("-x", f"http://127.0.0.1:{port}", "http://10.0.0.5/")  # decided only
    assert refused[0] == 0 and "10.0.0.5 is a private address" in refused[1]
    idle = await asyncio.open_connection("127.0.0.1", port)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"still open")
    assert await reader.readexactly(10) == b"still open"
    await proxy.close()
    with pytest.raises(ConnectionResetError):  # the open tunnel ends, not as a complete answer
        await reader.read()
    assert await idle[0].read() == b""  # a client that had not asked yet is closed
    for stream in (writer, idle[1]):
        stream.close()
        with contextlib.suppress(ConnectionResetError):
            await stream.wait_closed()
    assert not path.exists()
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert open_fds() == fds


def connected(family: int, where: Any) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.connect(where)
    return sock


async def test_the_unix_socket_replaces_a_stale_one_and_leaves_a_newer_one(place: Path) -> None:
    path = place / "k.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # a socket file nobody listens on: a gateway's, killed
    first = KernelProxy(parse_network(True), "workspace")
    await first.start_unix(path)
    second = KernelProxy(parse_network(True), "workspace")
    await second.start_unix(path)  # the next gateway's, while the first is still closing
    await first.close()
    assert path.exists()
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(str(path))
    await second.close()
    assert not path.exists()
    path.write_text("not a socket")
    with pytest.raises(FileExistsError, match="is not a socket"):
        await KernelProxy(parse_network(True), "workspace").start_unix(path)
    with pytest.raises(ValueError, match="longer than 107 bytes"):
        await KernelProxy(parse_network(True), "w").start_unix(place / ("x" * 120))


@pytest.mark.parametrize(
    ("value", "host", "says"),
    [
        (False, "127.0.0.1", "a profile with no network has no proxy"),
        ("host", "127.0.0.1", "a profile with the host's network has no proxy"),
        (True, "0.0.0.0", "the kernel's proxy listens on loopback only, not on 0.0.0.0"),
    ],
)
async def test_what_a_proxy_refuses_to_be(value: bool | str, host: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        proxy = KernelProxy(parse_network(value), "p")
        await proxy.start_tcp(host)


@pytest.mark.parametrize(
    ("sent", "answer"),
    [
        (b"\x05\x01\x02", b"\x05\xff"),  # only user/password offered: no acceptable method
        (b"\x05\x01\x00\x05\x02\x00\x01\x7f\x00\x00\x01\x00\x50", b"\x05\x00\x05\x07"),  # BIND
        (b"\x05\x01\x00\x05\x01\x00\x09", b"\x05\x00\x05\x08"),  # an unknown address type
    ],
)
async def test_what_socks5_refuses_to_do(place: Path, sent: bytes, answer: bytes) -> None:
    proxy = KernelProxy(parse_network(["127.0.0.1"]), "mine")
    port = await proxy.start_tcp()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sent)
        assert (await reader.read())[: len(answer)] == answer
        writer.close()
        await writer.wait_closed()
    finally:
        await proxy.close()


TUNNEL_OK = b"HTTP/1.1 200 Connection established\r\n\r\n"
WAIT = 10.0  # seconds: a bound on what must happen at once, never a sleep
Sends = Callable[[contextlib.ExitStack, Path], tuple[list[int], bytes]]


@contextlib.contextmanager
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """Yield a TCP connection over 127.0.0.1, both ends blocking: the client's end and the
    accepted one (what a bridge accepts and hands over)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        near = socket.create_connection(listener.getsockname())
        far, _ = listener.accept()
    with near, far:
        yield near, far


async def tunnel(sock: socket.socket, echo: int, data: bytes) -> bytes:
    """CONNECT to the echo server over `sock`, send `data` and the end; return the reply."""
    sock.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\nHost: x\r\n\r\n".encode() + data)
    writer.write_eof()
    said = await reader.read()
    writer.close()
    await writer.wait_closed()
    return said


async def test_a_tcp_socket_handed_over_is_served_and_nothing_is_left(
    place: Path, echo: int
) -> None:
    async with proxied(place, parse_network(["127.0.0.1"])) as (proxy, _):
        before = open_fds()
        with tcp_pair() as (near, far):
            with hand_over(place / "mine.sock", [far.fileno()]) as conn:
                far.close()  # the bridge's copy: the gateway's is the only one now
                assert await asyncio.to_thread(conn.recv, 1) == b""  # the hand-over is done
            assert await tunnel(near, echo, b"ping") == TUNNEL_OK + b"pingbye"
        assert open_fds() == before
        assert proxy.refusals_since(0) == []


def several(count: int) -> Sends:
    def sends(stack: contextlib.ExitStack, place: Path) -> tuple[list[int], bytes]:
        return [stack.enter_context(tcp_pair())[1].fileno() for _ in range(count)], b"\0"

    return sends


def one(make: Callable[[contextlib.ExitStack, Path], Any], data: bytes = b"\0") -> Sends:
    """Return what sends the one fd `make` gives (an fd, or a thing with one to close)."""

    def sends(stack: contextlib.ExitStack, place: Path) -> tuple[list[int], bytes]:
        made = make(stack, place)
        return [made if isinstance(made, int) else stack.enter_context(made).fileno()], data

    return sends


def a_pipe(stack: contextlib.ExitStack, place: Path) -> int:
    read_end, write_end = os.pipe()
    stack.callback(os.close, write_end)
    stack.callback(os.close, read_end)
    return read_end


def a_unix_socket(stack: contextlib.ExitStack, place: Path) -> socket.socket:
    mine, other = socket.socketpair()
    stack.enter_context(other)
    return mine


@pytest.mark.parametrize(
    "sends",
    [
        pytest.param(one(a_pipe), id="a pipe"),
        pytest.param(one(lambda stack, place: (place / "f").open("w")), id="a file"),
        pytest.param(one(a_unix_socket), id="a unix socket"),
        pytest.param(
            one(lambda stack, place: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)),
            id="a UDP socket",
        ),
        pytest.param(
            one(lambda stack, place: socket.create_server(("127.0.0.1", 0))),
            id="a listening socket",
        ),
        pytest.param(several(2), id="two TCP sockets"),
        pytest.param(several(12), id="more fds than there is room for"),
        pytest.param(
            one(lambda stack, place: stack.enter_context(tcp_pair())[1], b"GET\0"),
            id="a TCP socket after other bytes",
        ),
    ],
)
async def test_what_is_not_one_tcp_socket_is_closed_and_no_fd_is_left(
    place: Path, echo: int, sends: Sends
) -> None:
    async with proxied(place, parse_network(["127.0.0.1"])) as (_, bridge):
        before = open_fds()
        with contextlib.ExitStack() as stack:
            fds, data = sends(stack, place)
            with hand_over(place / "mine.sock", fds, data) as conn:
                assert await asyncio.to_thread(conn.recv, 1) == b""  # closed, nothing said
        assert open_fds() == before  # every copy the gateway received is closed
        with socket.create_connection(("127.0.0.1", bridge)) as sock:  # it still serves
            assert await tunnel(sock, echo, b"still") == TUNNEL_OK + b"stillbye"


@pytest.mark.parametrize("spliced", [True, False])
async def test_fds_without_the_byte_or_after_the_first_message_never_arrive(
    place: Path, echo: int, spliced: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not spliced:
        monkeypatch.setattr(relay, "SPLICE", None)
    read_end, write_end = os.pipe()
    try:
        async with proxied(place, parse_network(["127.0.0.1"])):
            before = open_fds()
            with hand_over(place / "mine.sock", [read_end], b"") as conn:  # the OS drops them
                assert await asyncio.to_thread(conn.recv, 1) == b""
            # A unix client served itself, which sends an fd along later.
            conn = socket.socket(socket.AF_UNIX)
            conn.connect(str(place / "mine.sock"))
            conn.setblocking(False)
            reader, writer = await asyncio.open_connection(sock=conn)
            writer.write(f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            assert await reader.readuntil(b"\r\n\r\n") == TUNNEL_OK
            rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", read_end))]
            assert conn.sendmsg([b"with an fd"], rights) == 10
            writer.write_eof()
            assert await reader.read() == b"with an fdbye"
            writer.close()
            await writer.wait_closed()
            assert open_fds() == before
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_a_handed_socket_its_sender_made_blocking_does_not_stop_the_proxy(
    place: Path, echo: int
) -> None:
    async with proxied(place, parse_network(["127.0.0.1"])) as (_, bridge):
        with tcp_pair() as (near, far):
            kept = os.dup(far.fileno())  # the copy a sandbox may keep
            try:
                with hand_over(place / "mine.sock", [far.fileno()]) as conn:
                    assert await asyncio.to_thread(conn.recv, 1) == b""  # taken
                os.set_blocking(kept, True)  # on the open file the gateway's copy shares
                near.sendall(b"CONNECT 127.0.0.1:")  # read, then the rest is waited for
                # The client's end frees a proxy that blocked (then the test fails, not hangs).
                watchdog = threading.Timer(WAIT, near.shutdown, args=(socket.SHUT_WR,))
                watchdog.start()
                try:
                    began = time.monotonic()
                    with socket.create_connection(("127.0.0.1", bridge)) as other:
                        said = await tunnel(other, echo, b"meanwhile")
                    assert said == TUNNEL_OK + b"meanwhilebye"
                    assert time.monotonic() - began < WAIT / 2
                finally:
                    watchdog.cancel()
                    await asyncio.to_thread(watchdog.join)
            finally:
                os.close(kept)


async def closed_unanswered(sock: socket.socket) -> bool:
    """Return whether `sock` is closed without a word: an end, or a reset (what it sent was
    unread)."""
    try:
        return await asyncio.to_thread(sock.recv, 1) == b""
    except ConnectionResetError:
        return True


async def test_no_more_than_max_connections_live_at_once(
    place: Path, echo: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proxy_module, "MAX_CONNECTIONS", 3)
    connect = f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    async with proxied(place, parse_network(["127.0.0.1"])) as (proxy, bridge):
        tunnels = []
        for _ in range(2):  # two open tunnels, handed over by the bridge
            reader, writer = await asyncio.open_connection("127.0.0.1", bridge)
            writer.write(connect)
            assert await reader.readuntil(b"\r\n\r\n") == TUNNEL_OK
            tunnels.append((reader, writer))
        with socket.socket(socket.AF_UNIX) as idle:  # and a unix client that says nothing
            idle.connect(str(place / "mine.sock"))
            with socket.create_connection(("127.0.0.1", bridge)) as late:
                late.sendall(connect)
                assert await closed_unanswered(late)
            with socket.socket(socket.AF_UNIX) as late_unix:
                late_unix.connect(str(place / "mine.sock"))
                late_unix.sendall(connect)
                assert await closed_unanswered(late_unix)
            assert proxy.connections == 3
            reader, writer = tunnels.pop()  # one ends: there is room for one more
            writer.write_eof()
            assert await reader.read() == b"bye"
            writer.close()
            # Its relay closes its sockets after that end, then its task ends.
            while proxy.connections == 3:  # noqa: ASYNC110 (no event says a task ended)
                await asyncio.sleep(0)
            with socket.create_connection(("127.0.0.1", bridge)) as next_one:
                assert await tunnel(next_one, echo, b"in") == TUNNEL_OK + b"inbye"
        for _, writer in tunnels:
            writer.close()
