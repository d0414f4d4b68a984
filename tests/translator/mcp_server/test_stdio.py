"""The translator's stdio transport: the claim on fds 0 and 1, and the SDK's transport kept for
anything that is not a pipe."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import socket
import subprocess
import sys
import textwrap
import tty
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.gateways import GatewayProcess
from tests.support.translators import stdio

CLAIM_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from loomgate.translator.mcp_server.stdio import claimed_stdio
    with claimed_stdio() as (wire_in, wire_out):
        assert os.read(0, 100) == b"", "fd 0 must read /dev/null while serving"
        print("stray", flush=True)
        request = os.read(wire_in, 100)
        os.write(wire_out, b"reply to " + request)
    print("after", flush=True)
    """
)


def test_claim_diverts_fd_0_and_1_and_restores_them() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CLAIM_SCRIPT],
        input=b"request\n",
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == b"reply to request\nafter\n"
    assert done.stderr == b"stray\n"


def request(number: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    """Return one JSON-RPC line."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if number is not None:
        message["id"] = number
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


INITIALIZE = request(
    1,
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "stdio-test", "version": "0"},
    },
)
LIST_TOOLS = request(None, "notifications/initialized") + request(2, "tools/list")


@contextlib.asynccontextmanager
async def translator(
    gateway: GatewayProcess, stdin: Any, stdout: Any
) -> AsyncIterator[asyncio.subprocess.Process]:
    """Yield a `loomgate-mcp` process on the given stdio; killed afterwards if still running."""
    params = stdio(gateway)
    process = await asyncio.create_subprocess_exec(
        params.command,
        *params.args,
        stdin=stdin,
        stdout=stdout,
        stderr=asyncio.subprocess.PIPE,
        env=params.env,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def reply(reader: asyncio.StreamReader, number: int) -> dict[str, Any]:
    """Return the next JSON-RPC message, which must answer request `number`."""
    message: dict[str, Any] = json.loads(await asyncio.wait_for(reader.readline(), 60))
    assert message["id"] == number, message
    return message


async def exits_cleanly(process: asyncio.subprocess.Process) -> None:
    """Wait for the process to end after its input did; it must exit with status 0."""
    _, errors = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, errors.decode()


async def test_a_terminal_stdin_is_served_by_the_sdk_transport(gateway: GatewayProcess) -> None:
    """A terminal cannot be watched like a pipe: the SDK's threaded transport serves it."""
    controller, terminal = pty.openpty()
    tty.setraw(terminal)
    try:
        async with translator(gateway, terminal, asyncio.subprocess.PIPE) as process:
            os.close(terminal)
            assert process.stdout is not None
            os.write(controller, INITIALIZE)
            initialized = await reply(process.stdout, 1)
            assert initialized["result"]["serverInfo"]["name"] == "loomgate"
            os.write(controller, LIST_TOOLS)
            assert len((await reply(process.stdout, 2))["result"]["tools"]) == 13
            os.close(controller)  # the terminal hangs up: the process ends (EIO on its read)
            controller = -1
            status = await asyncio.wait_for(process.wait(), 30)
            assert process.stderr is not None
            assert status == 0, (await process.stderr.read()).decode()
    finally:
        if controller >= 0:
            os.close(controller)


async def test_end_of_stdin_ends_the_translator(gateway: GatewayProcess) -> None:
    """On pipes (served on the event loop), the host closing stdin ends the process, status 0."""
    pipe = asyncio.subprocess.PIPE
    async with translator(gateway, pipe, pipe) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(INITIALIZE)
        await reply(process.stdout, 1)
        process.stdin.close()
        await exits_cleanly(process)


@pytest.mark.parametrize("sockets", ["one for both", "one each"])
async def test_socket_stdio_is_served(gateway: GatewayProcess, sockets: str) -> None:
    """Node.js hosts (libuv) give a child a socketpair per stdio stream; others share one."""
    ours_in, theirs_in = socket.socketpair()
    ours_out, theirs_out = (
        (ours_in, theirs_in) if sockets == "one for both" else socket.socketpair()
    )
    async with translator(gateway, theirs_in, theirs_out) as process:
        theirs_in.close()
        theirs_out.close()
        reader, writer = await asyncio.open_connection(sock=ours_in)
        writers = [writer]
        if ours_out is not ours_in:
            reader, out_writer = await asyncio.open_connection(sock=ours_out)
            writers.append(out_writer)
        try:
            writer.write(INITIALIZE)
            await reply(reader, 1)
            writer.write(LIST_TOOLS)
            assert len((await reply(reader, 2))["result"]["tools"]) == 13
            writer.write_eof()
            await exits_cleanly(process)
        finally:
            for each in writers:
                each.close()
