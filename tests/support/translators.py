"""Real `loomgate-mcp` processes for tests: spawned with the command line the product builds."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from loomgate.translator.mcp_server.settings import Settings
from tests.support.gateways import GatewayProcess, free_port

TRANSLATOR_MODULE = "loomgate.translator.mcp_server"
TRANSLATOR = [sys.executable, "-m", TRANSLATOR_MODULE]


def translator_env(gateway: GatewayProcess) -> dict[str, str]:
    """Return the environment of a translator process talking to `gateway`."""
    return {**os.environ, "LOOMGATE_TOKEN": gateway.token}


def stdio(
    gateway: GatewayProcess, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    """Return how to spawn `loomgate-mcp` over stdio for `gateway` (`env` added to its own)."""
    flags = Settings(gateway=gateway.url, autostart=False).argv()
    return StdioServerParameters(
        command=TRANSLATOR[0],
        args=[*TRANSLATOR[1:], *flags, *args],
        env={**translator_env(gateway), **(env or {})},
    )


def stdio_for(settings: Settings) -> StdioServerParameters:
    """Return how to spawn `loomgate-mcp` with `settings` (their own command line, cwd, env)."""
    return StdioServerParameters(
        command=TRANSLATOR[0],
        args=[*TRANSLATOR[1:], *settings.argv()],
        env={**os.environ, **settings.env},
        cwd=settings.cwd,
    )


START_LINE = "loomgate-mcp: serving MCP at "  # printed once the HTTP port listens
HTTP_START_TIMEOUT = 60.0


@dataclass
class HttpTranslator:
    """A running `loomgate-mcp --transport streamable-http`: its URL and what it printed."""

    url: str
    stderr: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def http_translator(
    gateway: GatewayProcess, state_dir: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[HttpTranslator]:
    """Run `loomgate-mcp --transport streamable-http` (its state dir `state_dir`, `args` added)
    until it prints its start line; yield it; stop it by pid, also on failure."""
    port = free_port()
    settings = Settings(
        gateway=gateway.url, autostart=False, transport="streamable-http", port=port
    )
    process = await asyncio.create_subprocess_exec(
        *TRANSLATOR,
        *settings.argv(),
        *args,
        env={**translator_env(gateway), "LOOMGATE_STATE_DIR": str(state_dir), **(env or {})},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    served = HttpTranslator(f"http://127.0.0.1:{port}/mcp")
    started = asyncio.Event()

    async def drain() -> None:  # read to the end: a full pipe would stall the server
        assert process.stderr is not None
        follows = 0  # lines of the start message still to come (the registration command)
        async for raw in process.stderr:
            line = raw.decode(errors="replace")
            served.stderr.append(line)
            if line.startswith(START_LINE):
                follows = 1 if line.rstrip().endswith("Register it with:") else 0
            elif follows:
                follows -= 1
            else:
                continue
            if not follows:
                started.set()

    reader = asyncio.ensure_future(drain())
    try:
        ready = asyncio.ensure_future(started.wait())
        await asyncio.wait(
            [ready, reader], timeout=HTTP_START_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        ready.cancel()
        assert started.is_set(), f"loomgate-mcp did not start: {''.join(served.stderr)}"
        yield served
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()
        await reader


@contextlib.asynccontextmanager
async def bearer_client(url: str, token: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    """An MCP client of `url` over Streamable HTTP sending `token` as its bearer token (None:
    no Authorization header), on the SDK's own transport."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as mcp,
    ):
        yield mcp


def translator_pids() -> set[int]:
    """Return the pids of translator processes that are children of this test process."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if parent == os.getpid() and TRANSLATOR_MODULE.encode() in cmdline:
            found.add(int(entry.name))
    return found
