"""The bridge a confined kernel runs (sandbox/network/bridge.py), as a real `python -I -S` process:
it hands each connection's socket to the proxy's unix socket (one byte, one fd) and keeps no copy,
closes a client at once while that socket is missing and hands over again once it is back, ignores
SIGINT, dies with its parent, says a start error in one line, and inside a network namespace of its
own reaches the host's loopback only through the gateway's proxy."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from loomgate.gateway.sandbox.network import bridge
from loomgate.gateway.sandbox.network.handover import HANDED
from loomgate.gateway.sandbox.network.network_rules import parse_network
from loomgate.gateway.sandbox.network.proxy import KernelProxy
from tests.support.bridges import (
    bridge_command,
    file_server,
    running_bridge,
    served,
    short_dir,
)
from tests.support.gateways import free_port

STDLIB = {"__future__", "contextlib", "ctypes", "os", "signal", "socket", "struct", "sys"}
STDLIB |= {"select", "threading", "time"}
WAIT = 10.0  # seconds: a bound on what must happen at once, never a sleep
# Run inside the namespace: start the bridge, fetch the host's file through it, then directly.
DRIVER = """
import json, subprocess, sys
bridge_py, socket_path, port, url = sys.argv[1:]
bridge = subprocess.Popen([sys.executable, "-I", "-S", bridge_py, socket_path, port],
                          stdout=subprocess.PIPE)
bridge.stdout.read()
curl = ["/usr/bin/curl", "-sS", "--max-time", "20"]
via = subprocess.run(curl + ["-x", "http://127.0.0.1:" + port, url], capture_output=True)
direct = subprocess.run(curl + [url], capture_output=True)
bridge.kill()
print(json.dumps([via.stdout.decode(), direct.returncode, direct.stderr.decode()]))
"""


@pytest.fixture
def place() -> Iterator[Path]:
    with short_dir() as path:
        yield path


class HandOver(NamedTuple):
    """What one hand-over carried: its bytes, its fds, and the socket's family and peer."""

    data: bytes
    fds: int
    family: int
    peer: tuple[str, int]


def echo(sock: socket.socket) -> None:
    """Echo until the client's end, then say b"bye"."""
    while data := sock.recv(65536):
        sock.sendall(data)
    sock.sendall(b"bye")


@contextlib.contextmanager
def receiver(path: Path, serve: Callable[[socket.socket], None] = echo) -> Iterator[list[HandOver]]:
    """Take hand-overs on a unix socket at `path` as the gateway's proxy does, `serve` each
    socket handed over, and yield the list of what each hand-over carried; remove the socket at
    the end, as a gateway that stops removes its proxy's."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(16)
    taken: list[HandOver] = []

    def take(conn: socket.socket) -> None:
        with conn:
            data, ancillary, _, _ = conn.recvmsg(16, socket.CMSG_SPACE(8 * 4))
        fds = [fd for _, _, payload in ancillary for fd in array("i", payload)]
        for extra in fds[1:]:
            os.close(extra)
        with socket.socket(fileno=fds[0]) as handed:
            taken.append(HandOver(data, len(fds), handed.family, handed.getpeername()))
            serve(handed)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                threading.Thread(target=take, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield taken
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join()
        path.unlink()


def round_trip(port: int, data: bytes, ports: list[int] | None = None) -> bytes:
    """Send `data` through the bridge, end the sending side, return all that comes back;
    `ports`: the client's port is added to it."""
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        if ports is not None:
            ports.append(sock.getsockname()[1])
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        got = bytearray()
        while chunk := sock.recv(1 << 20):
            got += chunk
        return bytes(got)


def closed_at_once(port: int) -> bool:
    """Return whether a client of the bridge is closed (EOF or reset) without an answer; the
    reset may come before connect() returns (its pending error, with a timeout set)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
            return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_the_bridge_is_python_3_8_and_the_standard_library_only() -> None:
    tree = ast.parse(Path(bridge.__file__).read_text(), feature_version=(3, 8))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= STDLIB


def test_it_hands_each_connection_over_as_one_byte_with_its_fd(place: Path) -> None:
    path = place / "p.sock"
    with receiver(path) as taken, running_bridge(path) as (_, port):
        ports: list[int] = []
        data = os.urandom(3 << 20)
        assert round_trip(port, data, ports) == data + b"bye"
        results: list[bytes] = []
        clients = [
            threading.Thread(target=lambda: results.append(round_trip(port, b"x" * 100000, ports)))
            for _ in range(8)
        ]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        assert results == [b"x" * 100000 + b"bye"] * 8
    # The socket handed over is the client's connection itself, not one of the bridge's.
    assert taken[0] == HandOver(HANDED, 1, socket.AF_INET, ("127.0.0.1", ports[0]))
    assert sorted(taken[1:]) == sorted(
        HandOver(HANDED, 1, socket.AF_INET, ("127.0.0.1", p)) for p in ports[1:]
    )


def test_it_keeps_no_copy_of_what_it_handed_over(place: Path) -> None:
    path = place / "p.sock"
    with receiver(path, serve=lambda sock: None) as taken, running_bridge(path) as (process, port):
        fds = set(Path(f"/proc/{process.pid}/fd").iterdir())  # its own: it listens already
        for _ in range(21):
            # The receiver closes what it got at once: the client sees the end only when no
            # copy of its connection is left open in the bridge.
            with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
                assert sock.recv(1) == b""
        assert len(taken) == 21
        # Its unix connection to the proxy may close a moment after the client saw the end (no
        # event tells of another process's fds): looked at until it has, within WAIT.
        deadline = time.monotonic() + WAIT
        while kept := set(Path(f"/proc/{process.pid}/fd").iterdir()) - fds:
            assert time.monotonic() < deadline, f"the bridge kept {sorted(kept)} open"
            time.sleep(0.01)


def test_a_client_is_closed_at_once_while_the_proxy_is_away_then_served(place: Path) -> None:
    path = place / "p.sock"
    with running_bridge(path) as (process, port):
        assert closed_at_once(port)  # no socket at all
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(str(path))
        stale.close()
        assert closed_at_once(port)  # a socket nobody listens on: refused
        path.unlink()
        with receiver(path):
            assert round_trip(port, b"first gateway") == b"first gatewaybye"
        assert closed_at_once(port)  # the gateway restarting
        with receiver(path):
            assert round_trip(port, b"next gateway") == b"next gatewaybye"
        assert process.poll() is None


def test_sigint_is_ignored(place: Path) -> None:
    path = place / "p.sock"
    with receiver(path), running_bridge(path) as (process, port):
        status = Path(f"/proc/{process.pid}/status").read_text()
        ignored = int(
            next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16
        )
        assert ignored & (1 << (signal.SIGINT - 1))
        process.send_signal(signal.SIGINT)
        assert round_trip(port, b"still here") == b"still herebye"
        assert process.poll() is None


def test_it_dies_with_the_process_that_started_it(place: Path) -> None:
    starter = (
        "import subprocess, sys, time\n"
        "bridge = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)\n"
        "bridge.stdout.read()\n"
        "print(bridge.pid, flush=True)\n"
        "time.sleep(3600)\n"
    )
    command = [sys.executable, "-c", starter, *bridge_command(place / "p.sock", free_port())]
    parent = subprocess.Popen(command, stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        watch = os.pidfd_open(pid)
        try:
            assert select.select([watch], [], [], 0)[0] == []  # alive
            parent.kill()
            assert select.select([watch], [], [], WAIT)[0] == [watch]  # ended with its parent
        finally:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(watch, signal.SIGKILL)  # when it did not
            os.close(watch)
    finally:
        parent.kill()
        parent.communicate()


def test_with_while_it_serves_as_long_as_that_process_lives_not_its_parent(place: Path) -> None:
    # In a sandbox it is the init's child (which reaps it), serving while the kernel lives.
    kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    command = [*bridge_command(place / "p.sock", free_port()), "--while", str(kernel.pid)]
    bridge = subprocess.Popen(command, stdout=subprocess.PIPE)
    try:
        assert bridge.stdout is not None and bridge.stdout.read() == b""  # it listens
        assert bridge.poll() is None  # its parent (this test) lives on, and so does it
        kernel.kill()
        kernel.wait()
        assert bridge.wait(WAIT) == 0  # ended with the kernel
    finally:
        for process in (kernel, bridge):
            process.kill()
            process.wait()


def test_a_start_error_is_one_line_on_stderr(place: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            bridge_command(place / "p.sock", port), capture_output=True, timeout=WAIT
        )
    assert done.returncode == 1
    assert (
        done.stderr.decode()
        == f"bridge: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    )
    done = subprocess.run(
        [*bridge_command(place / "p.sock", 1)[:-2], "only-one"], capture_output=True
    )
    assert (done.returncode, done.stderr) == (
        2,
        b"usage: python -I -S bridge.py SOCKET_PATH PORT [--while PID]\n",
    )


def test_it_listens_on_ipv6_loopback_too(place: Path) -> None:
    with running_bridge(place / "p.sock") as (process, port):
        table = Path(f"/proc/{process.pid}/net/tcp6").read_text().splitlines()[1:]
        listening = {(fields[1], fields[3]) for fields in map(str.split, table)}
    assert (f"{'0' * 24}01000000:{port:04X}", "0A") in listening  # [::1]:PORT, LISTEN


async def test_inside_its_own_network_namespace_only_the_proxy_reaches_the_host(
    place: Path,
) -> None:
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is on PATH on this machine (tests/gateway/sandbox/)"
    (place / "site").mkdir()
    (place / "site" / "hello.txt").write_text("hello from the host's loopback\n")
    with served(file_server(place / "site")) as origin:
        proxy = KernelProxy(parse_network([f"127.0.0.1:{origin}"]), "mine")
        await proxy.start_unix(place / "p.sock")
        try:
            namespace = [bwrap, "--unshare-net", "--die-with-parent", "--ro-bind", "/", "/"]
            namespace += ["--dev", "/dev", "--proc", "/proc", "--bind", str(place), str(place)]
            process = await asyncio.create_subprocess_exec(
                *namespace, sys.executable, "-I", "-S", "-c", DRIVER, bridge.__file__,
                *[str(place / "p.sock"), str(free_port()), f"http://127.0.0.1:{origin}/hello.txt"],
                stdout=subprocess.PIPE,
            )  # fmt: skip
            out, _ = await process.communicate()
        finally:
            await proxy.close()
    via, direct_code, direct_said = json.loads(out)
    assert via == "hello from the host's loopback\n"
    assert direct_code == 7, direct_said  # couldn't connect: its own loopback has no server
