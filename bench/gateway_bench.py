"""Gateway benchmark, side by side in one run: latency per trivial cell and a 1,000,000-line cell.

Run: `uv run python -m bench.gateway_bench [--iterations 200] [--out bench/results/gateway.md]`
(`--only-big`: the 1,000,000-line cell alone). Every read and search is checked (its lines,
its match) before its time counts.

Compares, interleaved in blocks of BLOCK iterations (each path in turn, so machine noise hits all
sides alike while each path runs warm):
- a raw jupyter_client loop (AsyncKernelClient straight to the kernel's ZMQ sockets),
- the standard kernel websocket of a loomgate gateway (v1 binary protocol),
- the same websocket on a stock jupyter_server (Nagle left on),
- loomgate's own submit+wait (one POST with `wait`), and submit then long-poll (POST + GET).
Then one cell printing 1,000,000 short lines, raw vs through the gateway, with the gateway's RSS
sampled throughout, a mid-stream range read and a literal search over the whole stream.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
from jupyter_client.manager import AsyncKernelManager

from tests.support.gateways import GatewayProcess, free_port
from tests.support.kernel_ws import KernelWebsocket

API = "/api/loomgate/kernels"
BIG_CELL = "for i in range(1_000_000): print(i)"
# IPython keeps 1,000 results, then warns on stderr every 200 more: run first on a kernel that a
# bench gives thousands of `1+1`, so that every result is just `2`.
KEEP_RESULTS = "get_ipython().displayhook.cache_size = 10**7"
BLOCK = 10  # iterations of one path in a row, before the next path takes its turn


async def raw_run(client: object, code: str) -> None:
    """Run `code` on a raw AsyncKernelClient; return when its reply and IOPub idle have arrived.

    Output messages are read and discarded.
    """
    msg_id = client.execute(code)  # type: ignore[attr-defined]
    while True:
        reply = await client.get_shell_msg()  # type: ignore[attr-defined]
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    while True:
        msg = await client.get_iopub_msg()  # type: ignore[attr-defined]
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            return


@contextlib.asynccontextmanager
async def raw_kernel(ipc_prefix: str | None = None) -> AsyncIterator[Any]:
    """Yield a ready AsyncKernelClient of a kernel of its own (on TCP loopback, or on ipc
    sockets at `ipc_prefix`), shut down afterwards."""
    km = AsyncKernelManager()
    if ipc_prefix is not None:
        km.transport, km.ip, km.cache_ports = "ipc", ipc_prefix, False
    await km.start_kernel()
    raw = km.client()
    raw.start_channels()
    try:
        await raw.wait_for_ready(timeout=60)
        yield raw
    finally:
        raw.stop_channels()
        await km.shutdown_kernel(now=True)


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    """Return how long awaiting `fn()` took, in milliseconds."""
    start = time.perf_counter()
    await fn()
    return (time.perf_counter() - start) * 1000


def rotated(names: tuple[str, ...], turn: int) -> list[str]:
    """Return `names` starting at a different one each turn, so no side always goes first."""
    return [names[(turn + i) % len(names)] for i in range(len(names))]


async def interleave(
    runs: Mapping[str, Callable[[], Awaitable[object]]], iterations: int, block: int = BLOCK
) -> dict[str, list[float]]:
    """Return each run's latencies (ms): warmed up, then run in turns of `block` iterations,
    each turn starting with the next run, so that no run always follows the same one."""
    for fn in runs.values():
        for _ in range(5):
            await fn()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for turn in range(iterations // block):
        for name in rotated(tuple(runs), turn):
            for _ in range(block):
                samples[name].append(await timed(runs[name]))
    return samples


class RssSampler:
    """Samples a process's resident set size in a thread; reports the peak above the start."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.start_kb = self.rss_kb()
        self.peak_kb = self.start_kb
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def rss_kb(self) -> int:
        """Return the current VmRSS in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak_kb = max(self.peak_kb, self.rss_kb())

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def stock_server(port: int, token: str, root: Path) -> subprocess.Popen[bytes]:
    """Start a stock jupyter_server (no loomgate) for comparison."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}",
            "--ServerApp.allow_root=True",
            "--ServerApp.open_browser=False",
            f"--ServerApp.root_dir={root}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def wait_http(url: str, token: str) -> None:
    """Wait until a Jupyter server answers /api/kernels."""
    async with httpx.AsyncClient(headers={"Authorization": f"token {token}"}) as http:
        for _ in range(600):
            try:
                if (await http.get(f"{url}/api/kernels")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} did not come up")


class LeanHttp:
    """A minimal keep-alive HTTP/1.1 JSON client on asyncio streams (to separate the gateway's
    cost from httpx's ~1 ms of client-side work per request)."""

    def __init__(self, port: int, token: str) -> None:
        self.port = port
        self.token = token
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(
        self, method: str, path: str, data: dict[str, object] | None = None
    ) -> dict[str, object]:
        """Send `data` (if any) as JSON; return the decoded JSON response."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        body = json.dumps(data).encode() if data is not None else b""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Authorization: token {self.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        headers = await self.reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in headers.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        return json.loads(await self.reader.readexactly(length))  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the connection."""
        if self.writer is not None:
            self.writer.close()


def summary(samples: list[float]) -> tuple[float, float]:
    """Return (median, p90) of `samples`."""
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.9) - 1]


async def latency(gw: GatewayProcess, stock_url: str, token: str, iterations: int) -> list[str]:
    """Return table rows for the trivial-cell latency comparison."""
    async with raw_kernel() as raw:
        return await compare_paths(raw, gw, stock_url, token, iterations)


async def compare_paths(
    raw: Any, gw: GatewayProcess, stock_url: str, token: str, iterations: int
) -> list[str]:
    """Return table rows: every path to a trivial cell, interleaved with the raw loop."""
    headers = {"Authorization": f"token {gw.token}"}
    stock_headers = {"Authorization": f"token {token}"}
    async with (
        httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=60) as http,
        httpx.AsyncClient(base_url=stock_url, headers=stock_headers, timeout=60) as stock,
    ):
        ws_kernel = (await http.post("/api/kernels", json={"name": "python3"})).json()["id"]
        loom_kernel = (await http.post(API, json={})).json()["kernel"]["id"]
        stock_kernel = (await stock.post("/api/kernels", json={"name": "python3"})).json()["id"]
        lean = LeanHttp(gw.port, gw.token)
        try:
            async with (
                KernelWebsocket(gw.url, gw.token, ws_kernel, binary=True) as ws,
                KernelWebsocket(stock_url, token, stock_kernel, binary=True) as stock_ws,
            ):

                async def submit_wait() -> None:
                    r = await http.post(
                        f"{API}/{loom_kernel}/executions",
                        json={"code": "1+1", "wait": 30, "head": 20},
                    )
                    assert r.json()["execution"]["state"] == "completed"

                async def submit_poll() -> None:
                    r = await http.post(f"{API}/{loom_kernel}/executions", json={"code": "1+1"})
                    number = r.json()["execution"]["number"]
                    r = await http.get(
                        f"{API}/{loom_kernel}/executions/{number}", params={"wait": 30, "head": 20}
                    )
                    assert r.json()["execution"]["state"] == "completed"

                async def lean_wait() -> None:
                    r = await lean.request(
                        "POST",
                        f"{API}/{loom_kernel}/executions",
                        {"code": "1+1", "wait": 30, "head": 20},
                    )
                    assert r["execution"]["state"] == "completed"  # type: ignore[index]

                async def lean_poll() -> None:
                    r = await lean.request(
                        "POST", f"{API}/{loom_kernel}/executions", {"code": "1+1"}
                    )
                    number = r["execution"]["number"]  # type: ignore[index]
                    r = await lean.request(
                        "GET", f"{API}/{loom_kernel}/executions/{number}?wait=30&head=20"
                    )
                    assert r["execution"]["state"] == "completed"  # type: ignore[index]

                runs = {
                    "raw": lambda: raw_run(raw, "1+1"),
                    "ws": lambda: ws.run("1+1"),
                    "stock": lambda: stock_ws.run("1+1"),
                    "lean_wait": lean_wait,
                    "lean_poll": lean_poll,
                    "submit_wait": submit_wait,
                    "submit_poll": submit_poll,
                }
                samples = await interleave(runs, iterations)
        finally:
            lean.close()
            await http.delete(f"/api/kernels/{ws_kernel}")
            await http.delete(f"{API}/{loom_kernel}")
            await stock.delete(f"/api/kernels/{stock_kernel}")
    raw_median, _ = summary(samples["raw"])
    labels = {
        "raw": "raw jupyter_client loop",
        "ws": "loomgate websocket (v1)",
        "stock": "stock jupyter_server websocket",
        "lean_wait": "loomgate POST …/executions with wait (lean HTTP/1.1 client)",
        "lean_poll": "loomgate POST, then GET ?wait (long-poll, lean client)",
        "submit_wait": "loomgate POST …/executions with wait (httpx)",
        "submit_poll": "loomgate POST, then GET ?wait (long-poll, httpx)",
    }
    rows = []
    for name, label in labels.items():
        median, p90 = summary(samples[name])
        rows.append(f"| {label} | {median:.2f} | {p90:.2f} | {median / raw_median:.2f}× |")
    return rows


async def recorded_run(
    gw: GatewayProcess, http: httpx.AsyncClient, kernel: str, code: str
) -> tuple[dict[str, Any], float, float]:
    """Run `code` through the gateway; return its record, seconds taken and RSS growth in MB."""
    assert gw.proc is not None
    with RssSampler(gw.proc.pid) as rss:
        start = time.perf_counter()
        r = await http.post(f"{API}/{kernel}/executions", json={"code": code, "wait": 3600})
        seconds = time.perf_counter() - start
    return r.json()["execution"], seconds, (rss.peak_kb - rss.start_kb) / 1024


async def checked_read(http: httpx.AsyncClient, url: str, first: int, count: int) -> None:
    """Read lines first:first+count-1 of a stream of `print(i)` lines; check each one."""
    r = await http.get(url, params={"lines": f"{first}:{first + count - 1}"})
    lines = r.json()["lines"]
    assert [(x["n"], x["text"]) for x in lines] == [
        (n, str(n - 1)) for n in range(first, first + count)
    ], lines[:3]


async def checked_search(http: httpx.AsyncClient, kernel: str, number: int) -> None:
    """Search execution `number` (1,000,000 lines of `print(i)`) for "987654"; check that this
    one execution was searched and that the one match is the line printing it."""
    r = await http.get(
        f"{API}/{kernel}/search",
        params={"query": "987654", "mode": "literal", "stream": "stdout", "execution": number},
    )
    reply = r.json()
    assert r.status_code == 200, reply
    assert reply["execution"] == number and reply["searched"] == 1, reply
    assert reply["matches"] == 1 and not reply["truncated"], reply
    [group] = reply["groups"]
    matched = [(x["n"], x["text"]) for x in group["lines"] if x["marker"] == "M"]
    assert group["execution"] == number and matched == [(987655, "987654")], group


async def big_output(gw: GatewayProcess) -> list[str]:
    """Return table rows for the 1,000,000-line cell: wall time, RSS, read and search."""
    async with raw_kernel() as raw:
        raw_ms = await timed(lambda: raw_run(raw, BIG_CELL))
    headers = {"Authorization": f"token {gw.token}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=600) as http:
        kernel = (await http.post(API, json={})).json()["kernel"]["id"]
        try:
            execution, gw_seconds, growth_mb = await recorded_run(gw, http, kernel, BIG_CELL)
            gw_ms = gw_seconds * 1000
            assert execution["streams"]["stdout"]["lines"] == 1_000_000, execution["streams"]
            url = f"{API}/{kernel}/executions/{execution['number']}/streams/stdout"
            r = await http.post(
                f"{API}/{kernel}/executions",
                json={"code": "for i in range(100): print(i)", "wait": 60},
            )
            small = r.json()["execution"]
            assert small["streams"]["stdout"]["lines"] == 100, small["streams"]
            small_url = f"{API}/{kernel}/executions/{small['number']}/streams/stdout"
            reads, small_reads = [], []
            for _ in range(50):
                reads.append(await timed(lambda: checked_read(http, url, 500000, 20)))
                small_reads.append(await timed(lambda: checked_read(http, small_url, 40, 20)))
            number = execution["number"]
            searches = [await timed(lambda: checked_search(http, kernel, number)) for _ in range(5)]
            search_ms = statistics.median(searches)
        finally:
            await http.delete(f"{API}/{kernel}")
    return [
        f"| 1,000,000-line cell, raw jupyter_client (output discarded) | {raw_ms:.0f} ms | |",
        f"| same cell through loomgate, recorded | {gw_ms:.0f} ms | {gw_ms / raw_ms:.2f}× |",
        f"| gateway RSS growth during the cell | {growth_mb:.1f} MB | |",
        f"| read lines 500000:500019 over HTTP (median of 50) | "
        f"{statistics.median(reads):.2f} ms | |",
        f"| read lines 40:59 of a 100-line execution, for comparison | "
        f"{statistics.median(small_reads):.2f} ms | |",
        f"| literal search of the 1,000,000-line execution over HTTP (1 match; median of 5) | "
        f"{search_ms:.0f} ms | |",
    ]


FLOOD_CELL = """
line = "x" * 1023
for _ in range({lines}):
    print(line)
"""


async def flood(gw: GatewayProcess, gigabytes: float) -> list[str]:
    """Return table rows for a cell printing `gigabytes` GiB in 1 KiB lines: time and RSS.

    ipykernel batches a busy cell's output into messages of tens of MB (one per flush, every
    0.2 s); the gateway's memory follows the size of one message, not the size of the output.
    """
    lines = int(gigabytes * 2**20)
    headers = {"Authorization": f"token {gw.token}"}
    async with httpx.AsyncClient(base_url=gw.url, headers=headers, timeout=3600) as http:
        kernel = (await http.post(API, json={})).json()["kernel"]["id"]
        try:
            code = FLOOD_CELL.format(lines=lines)
            execution, seconds, growth_mb = await recorded_run(gw, http, kernel, code)
        finally:
            await http.delete(f"{API}/{kernel}")
    streams = execution["streams"]
    assert streams["stdout"]["lines"] == lines, streams
    stored_gb = streams["stdout"]["bytes"] / 2**30
    return [
        f"| cell printing {stored_gb:.2f} GiB ({lines:,} lines), recorded | {seconds:.1f} s | |",
        f"| gateway RSS growth during it | {growth_mb:.1f} MB | |",
    ]


async def main() -> None:
    """Run both benchmarks and print (and optionally write) a Markdown report."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--gigabytes",
        type=float,
        default=0.0,
        help="also run a cell printing this many GiB (memory stays flat)",
    )
    parser.add_argument(
        "--only-big", action="store_true", help="only the 1,000,000-line cell (no latency paths)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        gw = GatewayProcess(Path(tmp) / "state")
        gw.extra_args = ["--log-level", "WARNING"]
        gw.start()
        stock_port, stock_token = free_port(), "bench-token"
        stock = None if args.only_big else stock_server(stock_port, stock_token, Path(tmp))
        try:
            rows = []
            if stock is not None:
                stock_url = f"http://127.0.0.1:{stock_port}"
                await wait_http(stock_url, stock_token)
                rows = await latency(gw, stock_url, stock_token, args.iterations)
            big = await big_output(gw)
            if args.gigabytes:
                big += await flood(gw, args.gigabytes)
        finally:
            if stock is not None:
                stock.terminate()
                stock.wait(30)
            gw.stop()
    trivial = [
        f"## Trivial cell `1+1`, {args.iterations} iterations per path, interleaved (ms)",
        "",
        "| path | median | p90 | median vs raw |",
        "|---|---|---|---|",
        *rows,
        "",
    ]
    publish(
        [
            *(trivial if rows else []),
            "## One cell printing 1,000,000 short lines",
            "",
            "| measure | value | vs raw |",
            "|---|---|---|",
            *big,
        ],
        args.out,
    )


def spread(values: list[float]) -> str:
    """Return "median (min–max)"."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def rounds_parser(doc: str | None, *, rounds: int) -> argparse.ArgumentParser:
    """Return a bench's argument parser, described by the first line of its `doc`, with
    `--rounds` (default `rounds`) and `--out` (the report's file); a bench adds its own."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--out", type=Path)
    return parser


def publish(lines: list[str], out: Path | None) -> None:
    """Print a Markdown report and, when `out` is given, write it there too."""
    report = "\n".join([*lines, ""])
    print(report)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report)


if __name__ == "__main__":
    asyncio.run(main())
