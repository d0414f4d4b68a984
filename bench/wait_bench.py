"""One wait, one request: `run_cell`'s wait as one long poll with progress beside it (the
product's), side by side with the request per second it was before (kept here, as
`sliced_run_cell`), in one process against one gateway.

    uv run python -m bench.wait_bench [--iterations 400] [--seconds 10] [--out FILE.md]

Both paths are the SDK's client → the translator's server in this process → the gateway, each
server with a conversation (and kernel) of its own, the second one's `run_cell` swapped for the
sliced one. Measured: the requests the translator sent the gateway for one cell of `--seconds`
seconds and the progress notifications the host got meanwhile; `run_cell("1+1")`'s latency,
interleaved in blocks; and how long after a cell's last line its reply arrived.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from bench.gateway_bench import interleave, publish
from bench.sandbox_bench import bench_root
from loomgate.shared import wire
from loomgate.shared.wire import FINAL_STATES
from loomgate.translator.client.errors import Busy, Unavailable
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.session import GatewaySession
from loomgate.translator.mcp_server.cell_follower import CellFollower
from loomgate.translator.mcp_server.input_dialogs import ask_host
from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from loomgate.translator.mcp_server.tool_registry import ToolFailure, conversation_of, tool
from loomgate.translator.presentation import busy_refusal, kernel_gone_refusal, progress_message
from tests.support.gateways import GatewayProcess

SLICE_SECONDS = 1.0  # the slices the wait was cut into before
LAG_ROUNDS = 6  # cells per path whose reply is timed against their last line
LAG_CELL = "import time\ntime.sleep(1.5)\nprint(repr(time.time()))"
PATHS = {
    "one": "one long poll, progress beside it (the product)",
    "sliced": "a request per second, progress between (before)",
}


@tool
async def sliced_run_cell(
    code: str, ctx: Context, wait_seconds: Annotated[float, Field(ge=0, le=3600)] = 10
) -> CallToolResult:
    """run_cell as it was before (full_output and kernel left out): its submit waits a slice."""
    conversation = conversation_of(ctx)
    follower = CellFollower(conversation)
    client, ref = await conversation.kernel_ref(None, create=True)
    startup = conversation.take_startup_output()
    deadline = time.monotonic() + wait_seconds
    try:
        response = await client.submit(
            ref, code, wait=min(SLICE_SECONDS, wait_seconds), **follower.output_args()
        )
    except Busy as e:
        raise ToolFailure(
            busy_refusal(e.details.get("running"), "model", e.details.get("setup"))
        ) from None
    except Unavailable as e:
        gone = e.details.get("kernel_id")
        if gone:
            await conversation.forget_kernel(gone)
            raise ToolFailure(kernel_gone_refusal(gone)) from None
        raise
    return await sliced_follow(ctx, follower, client, ref, response, deadline, startup)


async def sliced_follow(
    ctx: Context,
    follower: CellFollower,
    client: GatewayClient,
    ref: str,
    response: wire.ExecutionReply,
    deadline: float,
    note: str,
) -> CallToolResult:
    """CellFollower.follow as it was before: a long poll per second, progress between."""
    execution, returned = response["execution"], response["returned"]
    number = execution["number"]
    started = time.monotonic()
    while True:
        if returned == "input":
            if await ask_host(ctx, client, ref, execution, deadline):
                returned = "timeout"
                continue
            break
        if returned in ("final", "silent") or execution["state"] in FINAL_STATES:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        await sliced_progress(ctx, execution, time.monotonic() - started)
        response = await client.execution(
            ref, number, wait=min(SLICE_SECONDS, remaining), **follower.output_args()
        )
        execution, returned = response["execution"], response["returned"]
    return await follower.cell_result(
        client, ref, execution, returned, full_output=False, note=note
    )


async def sliced_progress(ctx: Context, execution: wire.Execution, waited: float) -> None:
    """Send the progress notification of a slice, its last line from the slice's reply."""
    output = execution.get("output")
    lines = [*output["head"], *output["tail"]] if output else []
    message = progress_message(execution["number"], waited, lines[-1]["text"] if lines else "")
    with contextlib.suppress(Exception):  # a host that dropped the token must not fail the call
        await ctx.report_progress(waited, None, message)


class RequestCounter:
    """Counts the requests every translator in this process sends its gateway while on."""

    def __init__(self, patch: pytest.MonkeyPatch) -> None:
        self.sent: list[tuple[str, str]] = []
        self.on = False
        send = GatewaySession.request

        async def counted(session: GatewaySession, method: str, path: str, **kw: Any) -> Any:
            if self.on:
                self.sent.append((method, path))
            return await send(session, method, path, **kw)

        patch.setattr(GatewaySession, "request", counted)

    @contextlib.contextmanager
    def counting(self) -> Any:
        """Count the requests sent inside; yield the list they go to."""
        self.sent, self.on = [], True
        try:
            yield self.sent
        finally:
            self.on = False


def server_for(settings: Settings, path: str) -> Any:
    """Return the translator's server of `path`: the product's, or with the sliced run_cell."""
    server = build_server(settings)
    if path == "sliced":
        server.remove_tool("run_cell")
        server.add_tool(sliced_run_cell, name="run_cell", structured_output=False)
    return server


@contextlib.asynccontextmanager
async def clients(settings: Settings) -> AsyncIterator[dict[str, Client]]:
    """Yield a client of each path's translator; their kernels are stopped afterwards."""
    async with contextlib.AsyncExitStack() as stack:
        opened = {
            path: await stack.enter_async_context(Client(server_for(settings, path), mode="auto"))
            for path in PATHS
        }
        try:
            yield opened
        finally:
            for client in opened.values():
                listing = await client.call_tool("list_kernels", {})
                current = (listing.structured_content or {}).get("current")
                if current:
                    await client.call_tool("stop_kernel", {"kernel": current})


async def long_cell(
    client: Client, counter: RequestCounter, seconds: float
) -> tuple[int, int, float]:
    """Return the requests a `seconds`-second cell cost (the monitor's report of a tool call
    aside), the progress notifications the host got, and the call's wall time (s)."""
    notes: list[float] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(progress)

    code = f"import time\ntime.sleep({seconds})"
    start = time.perf_counter()
    with counter.counting() as sent:
        await client.call_tool(
            "run_cell", {"code": code, "wait_seconds": seconds + 30}, progress_callback=progress
        )
    about_the_cell = [path for _, path in sent if "/executions" in path]
    return len(about_the_cell), len(notes), time.perf_counter() - start


async def lag(client: Client) -> float:
    """Return how long after the cell printed its last line (its end) the reply arrived (ms)."""
    result = await client.call_tool("run_cell", {"code": LAG_CELL, "wait_seconds": 30})
    arrived = time.time()
    text = "\n".join(block.text for block in result.content if block.type == "text")
    printed = float(text.strip().rsplit("\n", 1)[-1])
    return (arrived - printed) * 1000


def trivial_call(client: Client) -> Callable[[], Awaitable[object]]:
    """Return a call of run_cell("1+1") through `client`."""
    return lambda: client.call_tool("run_cell", {"code": "1+1"})


def spread(values: list[float]) -> str:
    """Return "median (min–max)" of `values`."""
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


async def bench(iterations: int, seconds: float) -> list[str]:
    """Return the report's lines."""
    with pytest.MonkeyPatch.context() as patch, bench_root("wait") as (root, project):
        counter = RequestCounter(patch)
        gw = GatewayProcess(root / "state", extra_args=["--log-level", "WARNING"]).start()
        try:
            settings = Settings(
                gateway=gw.url,
                autostart=False,
                cwd=str(project),
                env={"LOOMGATE_TOKEN": gw.token},
            )
            async with clients(settings) as by_path:
                for client in by_path.values():
                    await client.call_tool("run_cell", {"code": "1"})  # its kernel started
                long = {path: await long_cell(c, counter, seconds) for path, c in by_path.items()}
                lags: dict[str, list[float]] = {path: [] for path in PATHS}
                for _ in range(LAG_ROUNDS):
                    for path, client in by_path.items():
                        lags[path].append(await lag(client))
                runs = {path: trivial_call(client) for path, client in by_path.items()}
                trivial = await interleave(runs, iterations)
        finally:
            gw.stop()
    one, sliced = statistics.median(trivial["one"]), statistics.median(trivial["sliced"])
    return [
        "# One wait, one request",
        "",
        f"`uv run python -m bench.wait_bench --iterations {iterations} --seconds {seconds:g}`: "
        "the SDK's client in memory → the translator's server in this process → one gateway; "
        f"{os.cpu_count()} cores, load {', '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
        f"| path | requests for one {seconds:g}-s cell (its executions) | progress notifications "
        "| call (s) | reply after the cell's "
        f'last line, ms ({LAG_ROUNDS} cells) | run_cell("1+1") median ms | p90 |',
        "|---|---|---|---|---|---|---|",
        *(
            f"| {PATHS[path]} | {long[path][0]} | {long[path][1]} | {long[path][2]:.2f} | "
            f"{spread(lags[path])} | {statistics.median(trivial[path]):.2f} | "
            f"{statistics.quantiles(trivial[path], n=10)[-1]:.2f} |"
            for path in PATHS
        ),
        "",
        f'run_cell("1+1"), one long poll over sliced: {one / sliced:.2f}× '
        f"({iterations} calls each, interleaved in blocks).",
    ]


def main() -> None:
    """Run the bench and print (and optionally write) its Markdown report."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    publish(asyncio.run(bench(args.iterations, args.seconds)), args.out)


if __name__ == "__main__":
    main()
