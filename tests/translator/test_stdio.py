"""The translator's stdio transport: the claim on fds 0 and 1, and the SDK's transport kept for
anything that is not a pipe."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import socket
import subprocess
import sys
import textwrap
import tty
from pathlib import Path
from typing import Any

import pytest

from tests.gateways import GatewayProcess
from tests.translators import TRANSLATOR, translator_env

CLAIM_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from loomgate.translator.stdio import claimed_stdio
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


async def test_a_terminal_stdin_is_served_by_the_sdk_transport(
    gateway: GatewayProcess, private_config: Path
) -> None:
    """A terminal cannot be watched like a pipe: the SDK's threaded transport serves it."""
    controller, terminal = pty.openpty()
    tty.setraw(terminal)
    process = await asyncio.create_subprocess_exec(
        *TRANSLATOR,
        "--gateway",
        gateway.url,
        "--no-autostart",
        stdin=terminal,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=translator_env(gateway, private_config),
    )
    os.close(terminal)
    assert process.stdout is not None
    try:
        initialize = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "terminal-test", "version": "0"},
        }
        os.write(controller, request(1, "initialize", initialize))
        reply = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "loomgate"
        os.write(controller, request(None, "notifications/initialized"))
        os.write(controller, request(2, "tools/list"))
        listing = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
        assert listing["id"] == 2
        assert len(listing["result"]["tools"]) == 11
    finally:
        os.close(controller)
        try:
            await asyncio.wait_for(process.wait(), 30)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
            raise


async def test_end_of_stdin_ends_the_translator(
    gateway: GatewayProcess, private_config: Path
) -> None:
    """On pipes (served on the event loop), the host closing stdin ends the process, status 0."""
    process = await asyncio.create_subprocess_exec(
        *TRANSLATOR,
        "--gateway",
        gateway.url,
        "--no-autostart",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=translator_env(gateway, private_config),
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        initialize = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "pipe-test", "version": "0"},
        }
        process.stdin.write(request(1, "initialize", initialize))
        reply = json.loads(await asyncio.wait_for(process.stdout.readline(), 60))
        assert reply["id"] == 1
        process.stdin.close()
        _, errors = await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0, errors.decode()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize("sockets", ["one for both", "one each"])
async def test_socket_stdio_is_served(
    gateway: GatewayProcess, private_config: Path, sockets: str
) -> None:
    """Node.js hosts (libuv) give a child a socketpair per stdio stream; others share one."""
    ours_in, theirs_in = socket.socketpair()
    ours_out, theirs_out = (
        (ours_in, theirs_in) if sockets == "one for both" else socket.socketpair()
    )
    process = await asyncio.create_subprocess_exec(
        *TRANSLATOR,
        "--gateway",
        gateway.url,
        "--no-autostart",
        stdin=theirs_in,
        stdout=theirs_out,
        stderr=asyncio.subprocess.PIPE,
        env=translator_env(gateway, private_config),
    )
    theirs_in.close()
    theirs_out.close()
    reader, writer = await asyncio.open_connection(sock=ours_in)
    writers = [writer]
    if ours_out is not ours_in:
        reader, out_writer = await asyncio.open_connection(sock=ours_out)
        writers.append(out_writer)
    try:
        initialize = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "socket-test", "version": "0"},
        }
        writer.write(request(1, "initialize", initialize))
        reply = json.loads(await asyncio.wait_for(reader.readline(), 60))
        assert reply["id"] == 1
        writer.write(request(None, "notifications/initialized") + request(2, "tools/list"))
        listing = json.loads(await asyncio.wait_for(reader.readline(), 60))
        assert listing["id"] == 2 and len(listing["result"]["tools"]) == 11
        writer.write_eof()
        _, errors = await asyncio.wait_for(process.communicate(), 30)
        assert process.returncode == 0, errors.decode()
    finally:
        for each in writers:
            each.close()
        if process.returncode is None:
            process.kill()
            await process.wait()
