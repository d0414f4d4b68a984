"""Real `loomgate-mcp` processes for tests: how to spawn them, and finding them by pid."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp import StdioServerParameters

from loomgate.translator.session import Settings
from tests.gateways import GatewayProcess

TRANSLATOR = [sys.executable, "-m", "loomgate.translator.cli"]


def translator_env(gateway: GatewayProcess, config: Path) -> dict[str, str]:
    """Return the environment of a translator process talking to `gateway`."""
    return {**os.environ, "LOOMGATE_TOKEN": gateway.token, "XDG_CONFIG_HOME": str(config.parent)}


def stdio(
    gateway: GatewayProcess, config: Path, *args: str, env: dict[str, str] | None = None
) -> StdioServerParameters:
    """Return how to spawn `loomgate-mcp` over stdio for `gateway` (`env` added to its own)."""
    return StdioServerParameters(
        command=TRANSLATOR[0],
        args=[*TRANSLATOR[1:], "--gateway", gateway.url, "--no-autostart", *args],
        env={**translator_env(gateway, config), **(env or {})},
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
        if parent == os.getpid() and b"loomgate.translator.cli" in cmdline:
            found.add(int(entry.name))
    return found


def stdio_for(settings: Settings) -> StdioServerParameters:
    """Return how to spawn `loomgate-mcp` with the command line `settings` stand for."""
    args = [
        "--result-mode",
        settings.result_mode,
        "--max-lines",
        str(settings.limits.max_lines),
        "--max-chars",
        str(settings.limits.max_chars),
        "--request-timeout",
        str(settings.request_timeout),
    ]
    for flag, value in (("--gateway", settings.gateway), ("--kernel", settings.kernel)):
        if value is not None:
            args += [flag, value]
    args += ["--quiet"] * settings.quiet + ["--no-autostart"] * (not settings.autostart)
    return StdioServerParameters(
        command=TRANSLATOR[0],
        args=[*TRANSLATOR[1:], *args],
        env={**os.environ, **settings.env},
        cwd=settings.cwd,
    )
