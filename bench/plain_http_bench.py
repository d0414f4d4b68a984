"""Plain HTTP side by side: the translator's PlainHttpPool beside an h11 keep-alive client doing
the same JSON POST, against the tornado echo server (bench/echo_http_server.py) in its own
process; client CPU and wall time per call, and the import each library adds to the CLI's.

Run: `uv run python -m bench.plain_http_bench [--calls 2000] [--rounds 5]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlencode

from loomgate.translator.client.plain_http import PlainHttpPool
from tests.support.gateways import free_port

BODY = {"code": "1+1", "wait": 5, "head": 0, "tail": 0, "client": "bench"}
HEADERS = {"Authorization": "token bench"}


class H11Client:
    """One keep-alive connection driven by h11, doing what the pool does for a JSON request."""

    def __init__(self, host: str, port: int) -> None:
        import h11

        self.h11 = h11
        self.host, self.port = host, port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.connection = h11.Connection(h11.CLIENT)

    async def call(self, method: str, path: str, query: dict[str, str], body: object) -> object:
        """Return the status and decoded body of one request."""
        h11 = self.h11
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        payload = json.dumps(body).encode()
        headers = [("Host", f"{self.host}:{self.port}"), *HEADERS.items()]
        headers += [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        target = path + (f"?{urlencode(query)}" if query else "")
        data = self.connection.send(h11.Request(method=method, target=target, headers=headers))
        data = (data or b"") + (self.connection.send(h11.Data(data=payload)) or b"")
        writer.write(data + (self.connection.send(h11.EndOfMessage()) or b""))
        status, parts = 0, []
        while True:
            event = self.connection.next_event()
            if event is h11.NEED_DATA:
                self.connection.receive_data(await reader.read(1 << 16))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                parts.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                break
        self.connection.start_next_cycle()
        return status, json.loads(b"".join(parts))

    async def aclose(self) -> None:
        """Close the connection."""
        if self.streams is not None:
            self.streams[1].close()


def import_ms(module: str, base: str = "loomgate.translator.cli.main") -> float:
    """Return how long importing `module` takes on top of `base`, in a fresh process (ms)."""
    code = (
        f"import time, {base}\nt = time.perf_counter()\nimport {module}\n"
        "print((time.perf_counter() - t) * 1000)"
    )
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True).stdout)  # fmt: skip


async def measure(port: int, calls: int, rounds: int) -> None:
    """Print the table of calls to the echo server at `port`."""
    pool = PlainHttpPool(f"http://127.0.0.1:{port}/api/loomgate/", HEADERS, 5)
    h11 = H11Client("127.0.0.1", port)
    try:
        sides: dict[str, Callable[[], Awaitable[object]]] = {
            "PlainHttpPool": lambda: pool.call("POST", "echo", {}, BODY, 5),
            "h11": lambda: h11.call("POST", "/api/loomgate/echo", {}, BODY),
        }
        assert await sides["PlainHttpPool"]() == await sides["h11"]() == (200, BODY)
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for _ in range(rounds):
            for name, call in sides.items():  # side by side in every round
                cpu, wall = time.process_time(), time.perf_counter()
                for _ in range(calls):
                    await call()
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                results[name].append((cpu / calls * 1e6, wall / calls * 1e6))
    finally:
        await pool.aclose()
        await h11.aclose()
    print(f"| client, {rounds} rounds of {calls} calls | CPU per call, µs | wall per call, µs |")
    print("|---|---|---|")
    for name, rows in results.items():
        cpu_s, wall_s = [r[0] for r in rows], [r[1] for r in rows]
        print(
            f"| {name} | {statistics.median(cpu_s):.0f} ({min(cpu_s):.0f}–{max(cpu_s):.0f}) "
            f"| {statistics.median(wall_s):.0f} ({min(wall_s):.0f}–{max(wall_s):.0f}) |"
        )


def main() -> None:
    """Run the measurement."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "bench/echo_http_server.py", str(port)], stdout=subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()
        asyncio.run(measure(port, args.calls, args.rounds))
    finally:
        server.terminate()
        server.wait()
    for module in ("h11", "httpx", "websockets.asyncio.client", "http.cookiejar"):
        times = sorted(import_ms(module) for _ in range(args.rounds))
        print(f"import {module} on top of the CLI: {statistics.median(times):.0f} ms "
              f"({times[0]:.0f}–{times[-1]:.0f})")  # fmt: skip


if __name__ == "__main__":
    main()
