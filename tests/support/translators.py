"""Real `loomgate-mcp` processes for tests: spawned with the command line the product builds."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import StdioServerParameters

from loomgate.translator.mcp_server.settings import Settings
from tests.support.gateways import GatewayProcess

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
