"""The kernel's network path, side by side in one run: a loopback server reached directly (what
`none` gives) and through the bridge and the gateway's proxy (what a confined kernel gets,
outside bubblewrap: the same processes and sockets; the bridge hands each connection's socket
to the proxy, whose relay is the only one), as a CONNECT tunnel (https clients, SOCKS alike)
and as an absolute-form request (plain http://).

Run: `uv run python -m bench.proxy_bench [--rounds 5] [--megabytes 200] [--connects 200]
[--handed spliced] [--out F.md]`

A 200 MB download per path and round, the paths in a new order each round, each counted only
once all its bytes arrived; connect latency as the time from connect() to the last byte of a
one-byte response, the paths taking turns call by call, `--connects` per path in all. The server,
the proxy (a KernelProxy in an event loop of its own, as in the gateway) and the bridge
(`python -I -S bridge.py`) are processes of their own; the client is this process, with
blocking sockets. Goals (issue 42): download ≥ 0.8× of direct, latency ≤ +2 ms.
`--handed spliced` measures what splicing a handed socket would give; the gateway never does
(relay.py says why), so the default is what it runs: copied.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.gateway_bench import publish, rotated, rounds_parser
from loomgate.gateway.sandbox.network import bridge
from loomgate.gateway.sandbox.network import relay as relay_module
from loomgate.gateway.sandbox.network.network_rules import parse_network
from loomgate.gateway.sandbox.network.proxy import KernelProxy
from tests.support.gateways import free_port

BLOCK = memoryview(os.urandom(4 << 20))
PATHS = ("direct", "CONNECT", "forwarded")
PACED_BLOCK = 1 << 16
TICK = os.sysconf("SC_CLK_TCK")
GOALS = {"download": 0.8, "latency": 2.0}


def serve(rate: float) -> None:
    """Serve `GET /bytes/N` on a loopback port (printed): N bytes, then close; at most `rate`
    MB/s when `rate` (a link's pace, kept by waiting between blocks), else as fast as it can."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=512)
    print(listener.getsockname()[1], flush=True)

    def answer(sock: socket.socket) -> None:
        with sock:
            head = b""
            while b"\r\n\r\n" not in head:
                data = sock.recv(65536)
                if not data:
                    return
                head += data
            size = int(head.split(b" ", 2)[1].rsplit(b"/", 1)[1])
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
            began, total = time.perf_counter(), 0
            while size:
                sent = sock.send(BLOCK[: min(size, len(BLOCK) if not rate else PACED_BLOCK)])
                size -= sent
                total += sent
                if rate and (ahead := began + total / (rate * 1e6) - time.perf_counter()) > 0:
                    time.sleep(ahead)

    while True:
        client, _ = listener.accept()
        threading.Thread(target=answer, args=(client,), daemon=True).start()


def run_proxy(socket_path: Path, handed: str) -> None:
    """Run the proxy on `socket_path` until SIGTERM (a KernelProxy naming 127.0.0.1); `handed`
    "spliced": splice handed sockets too, to measure it."""
    if handed == "spliced":
        pumping = relay_module.pump

        async def spliced(
            source: socket.socket, sink: socket.socket, early: bytes, head: Any, splice: bool
        ) -> None:
            await pumping(source, sink, early, head, True)

        relay_module.pump = spliced

    async def main() -> None:
        proxy = KernelProxy(parse_network(["127.0.0.1"]), "bench")
        await proxy.start_unix(socket_path)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        print("ready", flush=True)
        await stop.wait()
        await proxy.close()

    asyncio.run(main())


def fetch(path: str, server: int, bridge_port: int, size: int) -> None:
    """Download `size` bytes from the server along `path`; check that all of them came."""
    direct = path == "direct"
    with socket.create_connection(("127.0.0.1", server if direct else bridge_port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rest = b""
        if path == "CONNECT":
            sock.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % server)
            reply, rest = read_head(sock, b"")
            assert reply.startswith(b"HTTP/1.1 200"), reply
        target = (
            f"/bytes/{size}" if path != "forwarded" else f"http://127.0.0.1:{server}/bytes/{size}"
        )
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        head, body = read_head(sock, rest)
        assert head.startswith(b"HTTP/1.1 200") and b"Content-Length: %d" % size in head, head
        got = len(body)
        buffer = bytearray(1 << 20)
        while got < size:
            count = sock.recv_into(buffer)
            assert count, f"{path}: the connection ended after {got} of {size} bytes"
            got += count
        assert got == size, (path, got, size)


def read_head(sock: socket.socket, data: bytes) -> tuple[bytes, bytes]:
    """Return an HTTP head and the bytes after it."""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        assert more, data
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def cpu_seconds(pid: int) -> float:
    """Return the CPU time process `pid` has used, its ended threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def timed(work: Callable[[], None]) -> float:
    began = time.perf_counter()
    work()
    return time.perf_counter() - began


def spread(values: list[float], digits: int = 2) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} ({low:.{digits}f}–{high:.{digits}f})"


def measure(
    server: int, bridge_port: int, pids: dict[str, int], args: argparse.Namespace
) -> list[str]:
    """Return the report's lines: downloads (MB/s, ratio to direct, the CPU time each process
    spent on them) and connect latency."""
    size = args.megabytes * 1_000_000
    fetch("direct", server, bridge_port, size // 10)  # warm up every path once
    fetch("CONNECT", server, bridge_port, size // 10)
    fetch("forwarded", server, bridge_port, size // 10)
    speeds: dict[str, list[float]] = {path: [] for path in PATHS}
    cpu = {path: dict.fromkeys(("client", *pids), 0.0) for path in PATHS}
    for turn in range(args.rounds):
        for path in rotated(PATHS, turn):
            before = {role: cpu_seconds(pid) for role, pid in pids.items()}
            client = time.thread_time()
            seconds = timed(lambda path=path: fetch(path, server, bridge_port, size))  # type: ignore[misc]
            cpu[path]["client"] += time.thread_time() - client
            for role, pid in pids.items():
                cpu[path][role] += cpu_seconds(pid) - before[role]
            speeds[path].append(size / seconds / 1e6)
    gigabytes = args.rounds * size / 1e9
    ratios = {
        path: [s / d for s, d in zip(speeds[path], speeds["direct"], strict=True)]
        for path in PATHS[1:]
    }
    latency: dict[str, list[float]] = {path: [] for path in PATHS}
    per_round = max(1, args.connects // args.rounds)
    rounds: dict[str, list[float]] = {path: [] for path in PATHS[1:]}
    for turn in range(args.rounds):
        mine: dict[str, list[float]] = {path: [] for path in PATHS}
        for call in range(per_round):
            for path in rotated(PATHS, turn + call):
                ms = 1000 * timed(lambda path=path: fetch(path, server, bridge_port, 1))  # type: ignore[misc]
                mine[path].append(ms)
                latency[path].append(ms)
        for path in PATHS[1:]:
            rounds[path].append(statistics.median(mine[path]) - statistics.median(mine["direct"]))
    paced = f" --rate {args.rate:g}" if args.rate else ""
    lines = [
        "# The kernel's network path: direct beside bridge + proxy",
        "",
        f"`uv run python -m bench.proxy_bench --rounds {args.rounds} --megabytes "
        f"{args.megabytes} --connects {args.connects} --handed {args.handed}{paced}`, "
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.1f} at the end; median (min–max) over the rounds.",
        "",
        f"| path | {args.megabytes} MB download, MB/s | × direct (goal ≥ "
        f"{GOALS['download']}) | connect + 1-byte GET, ms | − direct, ms (goal ≤ "
        f"+{GOALS['latency']}) |",
        "|---|---|---|---|---|",
    ]
    direct_ms = statistics.median(latency["direct"])
    lines.append(f"| direct | {spread(speeds['direct'], 0)} | 1 | {direct_ms:.3f} | 0 |")
    for path in PATHS[1:]:
        ratio = statistics.median(ratios[path])
        diff = statistics.median(latency[path]) - direct_ms
        verdict = "met" if ratio >= GOALS["download"] else "missed"
        late = "met" if diff <= GOALS["latency"] else "missed"
        lines.append(
            f"| {path} | {spread(speeds[path], 0)} | {spread(ratios[path])} ({verdict}) | "
            f"{statistics.median(latency[path]):.3f} | +{diff:.3f} (per round: "
            f"{spread(rounds[path], 3)}; {late}) |"
        )
    lines += [
        "",
        "CPU time per GB downloaded (all rounds; the bridge only hands sockets over):",
        "",
        "| path | client | server | proxy | bridge | all |",
        "|---|---|---|---|---|---|",
    ]
    for path in PATHS:
        each = {role: value / gigabytes for role, value in cpu[path].items()}
        lines.append(
            f"| {path} | {each['client']:.2f} s | {each['server']:.2f} s | {each['proxy']:.2f} s"
            f" | {each['bridge']:.2f} s | {sum(each.values()):.2f} s |"
        )
    return lines


def main() -> None:
    parser = rounds_parser(__doc__, rounds=5)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--connects", type=int, default=200, help="per path, over all rounds")
    parser.add_argument("--handed", choices=("copied", "spliced"), default="copied")
    parser.add_argument("--rate", type=float, default=0, help="the server's pace, MB/s (0: free)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--proxy", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.rate)
    if args.proxy:
        return run_proxy(args.proxy, args.handed)
    root = Path("/var/tmp") / f"lg-proxy-bench-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    me = [sys.executable, "-m", "bench.proxy_bench"]
    children: list[subprocess.Popen[bytes]] = []
    try:
        server = subprocess.Popen(
            [*me, "--serve", "--rate", str(args.rate)], stdout=subprocess.PIPE
        )
        children.append(server)
        assert server.stdout is not None
        server_port = int(server.stdout.readline())
        sock_path = root / "proxy.sock"
        proxy = subprocess.Popen(
            [*me, "--proxy", str(sock_path), "--handed", args.handed], stdout=subprocess.PIPE
        )
        children.append(proxy)
        assert proxy.stdout is not None and proxy.stdout.readline() == b"ready\n"
        bridge_port = free_port()
        started = subprocess.Popen(
            [sys.executable, "-I", "-S", bridge.__file__, str(sock_path), str(bridge_port)],
            stdout=subprocess.PIPE,
        )
        children.append(started)
        assert started.stdout is not None and started.stdout.read() == b""  # listening
        pids = {"server": server.pid, "proxy": proxy.pid, "bridge": started.pid}
        lines = measure(server_port, bridge_port, pids, args)
    finally:
        for child in children:
            child.terminate()
            child.wait()
        for item in root.iterdir():
            item.unlink()
        root.rmdir()
    publish(lines, args.out)


if __name__ == "__main__":
    main()
