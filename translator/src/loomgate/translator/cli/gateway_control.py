"""`loomgate gateway start|stop|status|logs`: the local gateway as a person controls it."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import signal
import sys
import time
from pathlib import Path

from loomgate.shared.paths import (
    DEFAULT_HOST,
    GATEWAY_FILE,
    LOG_FILE,
    read_gateway_file,
    state_dir,
)
from loomgate.translator.cli.errors import UsageError
from loomgate.translator.client.connection import open_client
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.local_gateway import gateway_command, process_alive
from loomgate.translator.client.selection import select_gateway
from loomgate.translator.presentation import format_elapsed

STOP_TIMEOUT = 30.0


def control_gateway(args: argparse.Namespace) -> int:
    """Start, stop, inspect or tail the local gateway; return the exit status."""
    directory = state_dir()
    info = read_gateway_file(directory)
    running = info is not None and process_alive(info["pid"])
    if args.action == "status":
        if not running or info is None:
            print("no local gateway is running")
            return 1
        started = (directory / GATEWAY_FILE).stat().st_mtime
        kernels = asyncio.run(count_kernels(info["url"], info["token"]))
        print(
            f"url: {info['url']}\npid: {info['pid']}\nversion: {info['version']}\n"
            f"uptime: {format_elapsed(time.time() - started)}\nkernels: {kernels}\n"
            f"state dir: {directory}"
        )
        return 0
    if args.action == "logs":
        return show_logs(directory / LOG_FILE, follow=args.follow)
    if args.action == "stop":
        if not running or info is None:
            print("no local gateway is running")
            return 0
        os.kill(info["pid"], signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while process_alive(info["pid"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if process_alive(info["pid"]):
            print(f"loomgate: the gateway (pid {info['pid']}) did not stop", file=sys.stderr)
            return 2
        print(f"stopped the gateway at {info['url']} (its kernels are shut down)")
        return 0
    if running and info is not None:
        print(f"a gateway is already running at {info['url']} (pid {info['pid']})")
        return 0
    if args.foreground:
        command = gateway_command(port=args.port or None, state_dir=directory)
        os.execv(command[0], command)
    return asyncio.run(start_in_background(args.port, args.no_autostart))


async def count_kernels(url: str, token: str) -> int:
    """Return how many kernels the gateway at `url` runs."""
    async with GatewayClient(url, token) as client:
        return len(await client.list_kernels())


async def start_in_background(port: int | None, no_autostart: bool) -> int:
    """Start the local gateway as a detached daemon and wait until it answers."""
    if no_autostart:
        raise UsageError("--no-autostart forbids starting the gateway")
    target = select_gateway(None, {})
    if port:
        target = dataclasses.replace(target, url=f"http://{DEFAULT_HOST}:{port}")
    client = await open_client(target, autostart=True)
    await client.aclose()
    info = read_gateway_file(state_dir())
    print(f"gateway running at {info['url'] if info else target.url}")
    return 0


def show_logs(path: Path, *, follow: bool) -> int:
    """Print the gateway log's last lines (and keep following with -f)."""
    if not path.exists():
        print(f"no gateway log at {path}")
        return 1
    with path.open(encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
        sys.stdout.writelines(lines[-50:])
        while follow:
            line = f.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
            else:
                time.sleep(0.2)
    return 0
