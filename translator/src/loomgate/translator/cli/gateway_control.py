"""`loomgate gateway …`: the local gateway as a person controls it: start, stop, restart,
status, logs, its token, and running it as a service."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import secrets
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from loomgate.shared import wire
from loomgate.shared.paths import (
    DEFAULT_HOST,
    GATEWAY_FILE,
    LOG_FILE,
    MONITOR_TOKEN_FILE,
    GatewayFile,
    read_gateway_file,
    read_port_file,
    read_token_file,
    state_dir,
    write_port_file,
    write_token_file,
)
from loomgate.translator.cli.errors import UsageError
from loomgate.translator.cli.service import install_service
from loomgate.translator.client.connection import open_client
from loomgate.translator.client.errors import Unreachable
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.local_gateway import gateway_command, upstream_state_dir
from loomgate.translator.client.processes import process_alive
from loomgate.translator.client.selection import select_gateway
from loomgate.translator.client.target import GatewayTarget
from loomgate.translator.presentation import format_elapsed, mechanism_lines, render_prewarmed

STOP_TIMEOUT = 60.0  # stopping the kernels too can take a while


def controlled(args: argparse.Namespace) -> GatewayTarget:
    """Return the gateway `loomgate gateway` acts on: the local one, or (with --gateway NAME)
    the upstream-mode gateway this machine runs for a kind = "jupyter" entry of gateways.toml."""
    target = select_gateway(getattr(args, "gateway", None), os.environ)
    if target.local or target.upstream:
        return target
    raise UsageError(
        f"`loomgate gateway` controls the gateways this machine starts: the local one, or one "
        f'for a kind = "jupyter" entry of gateways.toml; {target.name or target.url} is neither'
    )


def control_gateway(args: argparse.Namespace) -> int:
    """Start, stop, restart, inspect or tail the local gateway (or one for a kind = "jupyter"
    entry); return the exit status."""
    target = controlled(args)
    directory = upstream_state_dir(target) if target.upstream else state_dir()
    if target.upstream and (
        args.action in ("install-service", "rotate-token") or args.foreground or args.port
    ):
        raise UsageError(
            "install-service, rotate-token, --foreground and --port are for the local gateway; "
            f"the gateway for {target.name} is started on first use, or by `loomgate --gateway "
            f"{target.name} gateway start`"
        )
    if args.action == "install-service":
        port = args.port or read_port_file(directory)
        return install_service(directory, port, print_only=args.print)
    info = read_gateway_file(directory)
    running = info if info is not None and process_alive(info["pid"]) else None
    if args.action == "status":
        if running is None:
            print("no local gateway is running")
            return 1
        started = (directory / GATEWAY_FILE).stat().st_mtime
        try:
            kernels, about = asyncio.run(gateway_status(running["url"], running["token"]))
        except Unreachable as e:
            if not (e.refused and process_alive(running["pid"])):
                raise
            # Its gateway.json stays until it has let go of its port and kernels.
            print(f"the gateway (pid {running['pid']}) is stopping: it no longer answers")
            return 1
        upstream = about.get("upstream")
        if upstream:
            error = about.get("upstream_error")
            upstream_line = f"upstream: {upstream}" + (f" ({error})" if error else "") + "\n"
        else:
            upstream_line = ""
        print(
            f"url: {running['url']}\npid: {running['pid']}\nversion: {running['version']}\n"
            f"uptime: {format_elapsed(time.time() - started)}\nkernels: {kernels}\n"
            f"{upstream_line}{render_prewarmed(about)}\n"
            + "\n".join(mechanism_lines(about))
            + f"\nstate dir: {directory}"
        )
        return 0
    if args.action == "logs":
        return show_logs(directory / LOG_FILE, follow=args.follow)
    if args.action == "token":
        token = running["token"] if running is not None else read_token_file(directory)
        if token is None:
            print(f"no local gateway has run with the state dir {directory} yet", file=sys.stderr)
            return 1
        print(token)
        return 0
    if args.action == "rotate-token":
        write_token_file(directory, secrets.token_urlsafe(32))
        # The monitor's token too: the next start makes a new one.
        (directory / MONITOR_TOKEN_FILE).unlink(missing_ok=True)
        if running is None:
            print("new token kept; the next gateway start uses it")
            return 0
        stop(running, keep_kernels=True)
        port = urlsplit(running["url"]).port
        print("new token kept; restarting the gateway to use it (clients read gateway.json)")
        return asyncio.run(start_in_background(port, args.no_autostart))
    if args.action in ("stop", "restart"):
        keep = args.keep_kernels or args.action == "restart"
        if running is None:
            print("no local gateway is running")
            if args.action == "stop":
                return 0
        else:
            stop(running, keep_kernels=keep)
        if args.action == "stop":
            return 0
        port = args.port or (urlsplit(running["url"]).port if running else None)
        return asyncio.run(start_in_background(port, args.no_autostart, target))
    if running is not None:
        print(f"a gateway is already running at {running['url']} (pid {running['pid']})")
        return 0
    if args.foreground:
        command = gateway_command(port=args.port or read_port_file(directory), state_dir=directory)
        os.execv(command[0], command)
    return asyncio.run(start_in_background(args.port, args.no_autostart, target))


def stop(info: GatewayFile, *, keep_kernels: bool) -> None:
    """Stop the gateway `info` names and wait until it has exited (UsageError if it does not)."""
    asyncio.run(request_shutdown(info, keep_kernels=keep_kernels))
    deadline = time.monotonic() + STOP_TIMEOUT
    while process_alive(info["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    if process_alive(info["pid"]):
        raise UsageError(f"the gateway (pid {info['pid']}) did not stop within {STOP_TIMEOUT:g} s")
    kernels = "its kernels keep running" if keep_kernels else "its kernels are shut down"
    print(f"stopped the gateway at {info['url']} ({kernels})")


async def request_shutdown(info: GatewayFile, *, keep_kernels: bool) -> None:
    """Ask the gateway to stop, ending or keeping its kernels."""
    async with GatewayClient(info["url"], info["token"]) as client:
        await client.shutdown(keep_kernels=keep_kernels)


async def gateway_status(url: str, token: str) -> tuple[int, wire.Info]:
    """Return how many kernels the gateway at `url` runs, and what it says of itself."""
    async with GatewayClient(url, token) as client:
        return len(await client.list_kernels()), await client.info()


async def start_in_background(
    port: int | None, no_autostart: bool, target: GatewayTarget | None = None
) -> int:
    """Start the local gateway (or `target`'s upstream-mode one) as a detached daemon and wait
    until it answers."""
    if no_autostart:
        raise UsageError("--no-autostart forbids starting the gateway")
    if target is None or not target.upstream:
        target = select_gateway(None, {})
        if port:
            # Kept: later starts, autostart included, use it until another is chosen.
            write_port_file(state_dir(), port)
            target = dataclasses.replace(target, url=f"http://{DEFAULT_HOST}:{port}")
    client = await open_client(target, autostart=True)
    await client.aclose()
    info = read_gateway_file(upstream_state_dir(target) if target.upstream else state_dir())
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
