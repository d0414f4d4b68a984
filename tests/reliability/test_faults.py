"""Faults of processes: a translator, a kernel or the gateway killed mid-cell (its kernels under
the default profile), a frozen gateway."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from mcp import Client

from tests.support.figures import Figure
from tests.support.gateways import GatewayProcess, alive, kernel_processes_of, resident_kernels
from tests.support.mcp_clients import text
from tests.support.sandboxed_gateways import confined_gateway
from tests.support.sse import events, next_event
from tests.support.translators import stdio, translator_pids

TICK_COUNT = 200
TICKS = (
    f"import time\nfor i in range({TICK_COUNT}):\n"
    "    print('tick', i, flush=True)\n    time.sleep(0.02)"
)
CALL_TIMEOUT = 60.0  # a tool call that takes longer than this counts as hanging


@contextlib.asynccontextmanager
async def killable(gateway: GatewayProcess) -> AsyncIterator[tuple[Client, int]]:
    """A stdio translator and its pid; the test may SIGKILL it."""
    before = translator_pids()
    session = Client(stdio(gateway))
    mcp = await session.__aenter__()
    [pid] = translator_pids() - before
    try:
        yield mcp, pid
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        await session.__aexit__(None, None, None)  # closing on a server that is gone is clean


async def test_translator_killed_mid_cell(
    gateway: GatewayProcess, http: httpx.AsyncClient, figure: Figure
) -> None:
    async with killable(gateway) as (mcp, pid):
        started = await mcp.call_tool("run_cell", {"code": TICKS, "wait_seconds": 0.5})
        assert started.structured_content["state"] == "running"
        kernel = started.structured_content["kernel"]
        async with events(http, kernel) as stream:
            model = (await http.get(f"/api/loomgate/kernels/{kernel}")).json()["kernel"]
            assert model["holders"] == 1
            os.kill(pid, signal.SIGKILL)
            await next_event(stream, "holders", holders=0)  # the gateway saw it go
    model = (await http.get(f"/api/loomgate/kernels/{kernel}")).json()["kernel"]
    assert model["alive"] and model["lifetime"] == "conversation", "held by the grace period"
    async with Client(stdio(gateway)) as mcp:
        attached = await mcp.call_tool("connect", {"kernel": kernel[:8]})
        assert "Connected to kernel" in text(attached), text(attached)
        done = await mcp.call_tool("wait", {"execution": 1, "wait_seconds": 120})
        assert done.structured_content["state"] == "completed"
        read = await mcp.call_tool("read_output", {"execution": 1, "lines": f"1:{TICK_COUNT}"})
        lines = [line.split("│", 1)[1] for line in text(read).split("\n")[1:]]
        assert lines == [f"tick {i}" for i in range(TICK_COUNT)]
        await mcp.call_tool("stop_kernel", {"kernel": kernel})
    figure(
        scenario="fault: translator SIGKILL mid-cell",
        checked="the cell runs on to its end; the gateway drops the hold; the conversation "
        "kernel stays (grace period); a new translator reattaches and reads all output",
        lines_checked=TICK_COUNT,
    )


async def test_kernel_killed_mid_cell(confined_gateway: GatewayProcess, figure: Figure) -> None:
    gateway = confined_gateway.start()
    async with Client(stdio(gateway)) as mcp:
        first = await mcp.call_tool("run_cell", {"code": "1"})
        kernel = first.structured_content["kernel"]
        try:
            started = await mcp.call_tool("run_cell", {"code": TICKS, "wait_seconds": 0.5})
            assert started.structured_content["state"] == "running"
            killed = confined_kernel_pid(gateway)
            os.kill(killed, signal.SIGKILL)
            died = await mcp.call_tool("wait", {"execution": 2, "wait_seconds": 60})
            assert died.structured_content["state"] == "died", text(died)
            assert "SIGKILL" in text(died)
            after = await mcp.call_tool("run_cell", {"code": "40 + 2", "wait_seconds": 120})
            assert text(after).endswith("Out[3]: 42"), text(after)
            assert confined_kernel_pid(gateway) != killed  # a new kernel, confined again
        finally:
            await mcp.call_tool("stop_kernel", {"kernel": kernel})
    figure(
        scenario="fault: kernel SIGKILL mid-cell",
        checked="the confined kernel's process killed from outside: the execution ends `died` "
        "naming SIGKILL; the gateway serves; the kernel restarts confined and the next cell "
        "runs with the numbering continued",
        faults=1,
    )


def confined_kernel_pid(gateway: GatewayProcess) -> int:
    """Return the pid (as the host sees it) of the one kernel process of `gateway`, checked to
    run in a sandbox (bubblewrap's processes beside it)."""
    processes = kernel_processes_of(gateway.state_dir)
    assert any(Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap" for pid in processes)
    [pid] = [
        pid
        for pid in processes
        if b"copy_launcher.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
        and Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap"
    ]
    return pid


async def test_gateway_killed_and_restarted(confined_root: Path, figure: Figure) -> None:
    token = secrets.token_urlsafe(24)
    gateway = confined_gateway(confined_root, token=token)
    flag = confined_root / "stop-ticking"  # where the confined kernel sees it (not in /tmp)
    cwd = ("--cwd", str(confined_root / "project"))
    ticks_until_flag = (
        "import os, time\ni = 0\n"
        f"while not os.path.exists({str(flag)!r}):\n"
        "    print('tick', i, flush=True)\n    i += 1\n    time.sleep(0.02)\n'done'"
    )
    try:
        gateway.start()
        async with (
            Client(stdio(gateway, *cwd)) as finished,
            Client(stdio(gateway, *cwd), mode="legacy") as running,
        ):
            await running.call_tool("run_cell", {"code": "kept = 'variables'"})
            for i in range(3):
                code = f"for j in range(100): print('kept {i}', j)"
                await finished.call_tool("run_cell", {"code": code})
            started = await running.call_tool(
                "run_cell", {"code": ticks_until_flag, "wait_seconds": 1}
            )
            assert started.structured_content["state"] == "running"
            number = started.structured_content["execution"]
            seen = re.findall(r"tick \d+", text(started))

            sandboxes = resident_kernels(gateway.state_dir)
            assert len(sandboxes) == 4, sandboxes  # bwrap and the sandbox's init, each kernel
            gateway.kill()  # its kernels keep running; the restart takes them back
            assert all(process.is_alive() for process in sandboxes)
            began = time.monotonic()
            down = await asyncio.wait_for(finished.call_tool("status", {}), CALL_TIMEOUT)
            error_seconds = time.monotonic() - began
            assert down.is_error and "cannot reach the gateway" in text(down), text(down)
            assert error_seconds < 1, "a refused connection fails at once"
            assert token not in text(down)

            gateway.start()
            assert all(process.is_alive() for process in sandboxes)  # taken back, not restarted
            kept = await finished.call_tool("read_output", {"execution": 3, "lines": "-1:"})
            assert text(kept).endswith("100│kept 2 99"), text(kept)
            spanning = await running.call_tool("status", {"execution": number})
            assert spanning.structured_content["state"] == "running", text(spanning)
            flag.touch()
            ended = await running.call_tool("wait", {"execution": number})
            assert ended.structured_content["state"] == "completed", text(ended)
            shown = text(ended).split("\n")
            assert shown[-1] == f"Out[{number}]: 'done'", text(ended)
            [gap] = [line for line in shown if line.startswith("[output after line ")]
            assert "may be missing: no gateway listened for" in gap
            read = await running.call_tool("read_output", {"execution": number, "lines": ":5"})
            ticks = re.findall(r"│(tick \d+)", text(read))
            assert ticks == [f"tick {i}" for i in range(5)]
            found = await running.call_tool(
                "search_output", {"query": f"{seen[-1]}$", "execution": number, "mode": "regex"}
            )
            assert found.structured_content["matches"] == 1, text(found)  # kept from before
            again = await running.call_tool("run_cell", {"code": "kept"})
            assert text(again).endswith(f"Out[{number + 1}]: 'variables'"), text(again)
            await running.call_tool("stop_kernel", {"kernel": again.structured_content["kernel"]})
    finally:
        gateway.stop()
    figure(
        scenario="fault: gateway SIGKILL mid-cell, then restart (kernels under workspace)",
        checked="calls while it is down fail at once with a clear error; after the restart "
        "the kernels are taken back: finished records read whole, the running cell goes on and "
        "ends `completed` with its gap noted, variables and numbering continue",
        seconds_to_error_while_down=round(error_seconds, 2),
        lines_checked=300 + len(ticks),
    )


async def test_frozen_gateway(tmp_path: Path, figure: Figure) -> None:
    gateway = GatewayProcess(tmp_path / "state")
    try:
        gateway.start()
        params = stdio(gateway, "--request-timeout", "3")
        async with Client(params) as mcp:
            first = await mcp.call_tool("run_cell", {"code": "print('before the freeze')"})
            assert not first.is_error, text(first)
            assert gateway.proc is not None
            gateway.proc.send_signal(signal.SIGSTOP)
            try:
                waits = []
                # (tool, arguments, its bound: the request timeout, or a long-poll's wait plus
                # at most that timeout again)
                for tool, arguments, bound in [
                    ("status", {}, 3),
                    ("read_output", {"execution": 1}, 3),
                    ("wait", {"execution": 1, "wait_seconds": 1}, 4),
                ]:
                    began = time.monotonic()
                    frozen = await asyncio.wait_for(mcp.call_tool(tool, arguments), CALL_TIMEOUT)
                    waited = time.monotonic() - began
                    waits.append(waited)
                    assert frozen.is_error, text(frozen)
                    assert text(frozen) == (
                        f"the gateway at {gateway.url} did not answer within {bound} s"
                    )
                    assert bound <= waited < bound + 2, waited  # not hanging to the next limit
            finally:
                gateway.proc.send_signal(signal.SIGCONT)
            thawed = await mcp.call_tool("read_output", {"execution": 1})
            assert text(thawed).endswith("1│before the freeze"), text(thawed)
            await mcp.call_tool("stop_kernel", {"kernel": first.structured_content["kernel"]})
    finally:
        gateway.stop()
    figure(
        scenario="fault: gateway stops answering (SIGSTOP)",
        checked="status, read_output and wait each end with 'did not answer within …' after "
        "the request timeout (3 s here, 60 s by default) instead of hanging; after SIGCONT "
        "the same translator reads the output",
        calls=len(waits),
        slowest_seconds=round(max(waits), 1),
    )
