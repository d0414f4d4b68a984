"""Kernel sockets benchmark: a local kernel on ZMQ ipc files (what the gateway gives its
kernels) beside the same kernel on TCP loopback (jupyter_client's default), in one run.

Run: `uv run python -m bench.kernel_sockets_bench [--iterations 400] [--starts 5]
[--out bench/results/kernel_sockets.md]`

Two rows, each side by side in turns so machine noise hits both: a kernel's start to its
kernel_info reply, and an `execute_request` of `1+1` to its reply (with the result checked).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from bench.gateway_bench import interleave, publish, raw_kernel


def kernel(transport: str, work: Path) -> AbstractAsyncContextManager[Any]:
    """Return a ready client of a kernel of its own on `transport` (a fresh ipc dir each)."""
    if transport == "tcp":
        return raw_kernel()
    sockets = Path(tempfile.mkdtemp(prefix="ipc-", dir=work))
    return raw_kernel(str(sockets / "k"))


async def start_seconds(transport: str, work: Path) -> float:
    """Return seconds from a kernel's start to its kernel_info reply."""
    began = time.perf_counter()
    async with kernel(transport, work):
        return time.perf_counter() - began


async def execute(client: Any) -> None:
    """Run `1+1` and check its result."""
    reply = await client.execute_interactive("1+1", timeout=30, output_hook=check_two)
    assert reply["content"]["status"] == "ok", reply


def check_two(msg: dict[str, Any]) -> None:
    """Fail unless an execute_result says 2."""
    if msg["msg_type"] == "execute_result":
        assert msg["content"]["data"]["text/plain"] == "2", msg


def summary(values: list[float], unit: float, digits: int) -> str:
    """Return the median and range of `values` scaled by `unit`."""
    median, low, high = statistics.median(values), min(values), max(values)
    return f"{median * unit:.{digits}f} ({low * unit:.{digits}f}–{high * unit:.{digits}f})"


async def main() -> None:
    """Measure both rows and print (and write) the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lg-sockets-") as name:
        work = Path(name)
        starts: dict[str, list[float]] = {"tcp": [], "ipc": []}
        for _ in range(args.starts):
            for transport in starts:
                starts[transport].append(await start_seconds(transport, work))
        async with kernel("tcp", work) as tcp, kernel("ipc", work) as ipc:
            runs = {"tcp": lambda: execute(tcp), "ipc": lambda: execute(ipc)}
            latencies = await interleave(runs, args.iterations)
    ratio = statistics.median(latencies["ipc"]) / statistics.median(latencies["tcp"])
    start_ratio = statistics.median(starts["ipc"]) / statistics.median(starts["tcp"])
    publish(
        [
            "| measure | TCP loopback | ipc files | ipc / TCP |",
            "|---|---|---|---|",
            f"| kernel start → kernel_info reply, s ({args.starts} each) | "
            f"{summary(starts['tcp'], 1, 3)} | {summary(starts['ipc'], 1, 3)} | "
            f"{start_ratio:.2f}× |",
            f"| `1+1` execute → reply, ms ({args.iterations} each) | "
            f"{summary(latencies['tcp'], 1, 2)} | {summary(latencies['ipc'], 1, 2)} | "
            f"{ratio:.2f}× |",
        ],
        args.out,
    )


if __name__ == "__main__":
    asyncio.run(main())
