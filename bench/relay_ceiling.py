"""What any relay process reaches on this machine: a download from a loopback server direct,
and through a bare relay of blocking threads that copies (recv_into/sendall, 1 MiB) or splices
(os.splice through a pipe), side by side in one run. The ceiling the kernel's proxy
(bench/proxy_bench.py) is held against: no asyncio, no proxy protocol, no handed socket.

Run: `uv run python -m bench.relay_ceiling [--rounds 7] [--megabytes 200]`
"""

from __future__ import annotations

import argparse
import fcntl
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

from bench.gateway_bench import rotated

BLOCK = memoryview(os.urandom(4 << 20))
CHUNK = 1 << 20
F_SETPIPE_SZ = 1031
PATHS = ("direct", "copy", "splice")


def serve(size: int) -> None:
    """Send `size` bytes to each connection once it sends anything (its port printed)."""
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)

    def answer(sock: socket.socket) -> None:
        with sock:
            sock.recv(100)
            left = size
            while left:
                left -= sock.send(BLOCK[: min(left, len(BLOCK))])

    while True:
        accepted, _ = listener.accept()
        threading.Thread(target=answer, args=(accepted,), daemon=True).start()


def pump(kind: str, source: socket.socket, sink: socket.socket) -> None:
    """Move what `source` sends to `sink` until its end, by copying or splicing."""
    if kind == "copy":
        buffer = bytearray(CHUNK)
        while count := source.recv_into(buffer):
            sink.sendall(memoryview(buffer)[:count])
    else:
        read_end, write_end = os.pipe()
        fcntl.fcntl(write_end, F_SETPIPE_SZ, CHUNK)
        while count := os.splice(source.fileno(), write_end, CHUNK):
            while count:
                count -= os.splice(read_end, sink.fileno(), count)
        os.close(read_end)
        os.close(write_end)
    sink.shutdown(socket.SHUT_WR)


def relay(kind: str, upstream: int) -> None:
    """Relay each connection to the `upstream` port both ways (its own port printed)."""
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)

    def handle(client: socket.socket) -> None:
        with client, socket.create_connection(("127.0.0.1", upstream)) as server:
            up = threading.Thread(target=pump, args=(kind, client, server), daemon=True)
            up.start()
            pump(kind, server, client)
            up.join()

    while True:
        accepted, _ = listener.accept()
        threading.Thread(target=handle, args=(accepted,), daemon=True).start()


def fetch(port: int, size: int) -> float:
    """Return the MB/s of one download of `size` bytes from `port`, checked whole."""
    began = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"go")
        got, buffer = 0, bytearray(CHUNK)
        while got < size:
            count = sock.recv_into(buffer)
            assert count, f"the connection ended after {got} of {size} bytes"
            got += count
    return size / (time.perf_counter() - began) / 1e6


def started(*args: str) -> tuple[subprocess.Popen[bytes], int]:
    """Return a process of this module's and the port it printed."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.relay_ceiling", *args], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    return process, int(process.stdout.readline())


def main() -> None:
    """Run the paths in turn and print each one's speed and its ratio to direct."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--relay", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    size = args.megabytes * 1_000_000
    if args.serve:
        return serve(size)
    if args.relay:
        return relay(args.relay[0], int(args.relay[1]))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        server, port = started("--serve", "--megabytes", str(args.megabytes))
        processes.append(server)
        ports = {"direct": port}
        for kind in PATHS[1:]:
            process, ports[kind] = started("--relay", kind, str(port))
            processes.append(process)
        speeds: dict[str, list[float]] = {path: [] for path in PATHS}
        for turn in range(args.rounds + 1):  # the first round warms up and is not counted
            for path in rotated(PATHS, turn):
                speed = fetch(ports[path], size)
                if turn:
                    speeds[path].append(speed)
    finally:
        for process in processes:
            process.kill()
            process.wait()
    print(f"{args.megabytes} MB per download, {args.rounds} rounds, {os.cpu_count()} CPUs")
    for path, values in speeds.items():
        ratios = [s / d for s, d in zip(values, speeds["direct"], strict=True)]
        print(
            f"{path}: {statistics.median(values):.0f} MB/s, × direct "
            f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
