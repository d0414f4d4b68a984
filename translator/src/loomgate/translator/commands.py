"""`loomgate`: the person's command line (run, kernels, stop, gateway control)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from loomgate.shared.paths import read_gateway_file, state_dir
from loomgate.translator.autostart import connect, process_alive
from loomgate.translator.gateway_client import GatewayClient, GatewayError
from loomgate.translator.gateway_selection import GatewayConfigError, select_gateway
from loomgate.translator.presentation import (
    clipped_suffix,
    format_elapsed,
    render_kernels,
)

DEFAULT_KERNEL = "default"
POLL_SECONDS = 0.2
FINAL = {"completed", "error", "interrupted", "killed", "died", "lost"}
STOP_TIMEOUT = 30.0


class UsageError(Exception):
    """A command-line mistake (exit status 2)."""


def parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
    top = argparse.ArgumentParser(
        prog="loomgate", description="Persistent Jupyter kernels from the shell."
    )
    top.add_argument("--gateway", help="a gateways.toml name or a URL (default: local)")
    top.add_argument("--no-autostart", action="store_true", help="never start the local gateway")
    commands = top.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run a cell and stream its output")
    run.add_argument("code", nargs="?", help="the cell, or - to read it from stdin")
    run.add_argument("--file", type=Path, help="read the cell from this file")
    run.add_argument("--kernel", help=f"kernel name or id prefix (default: {DEFAULT_KERNEL!r})")
    run.add_argument("--json", action="store_true", help="print the record as JSON at the end")
    kernels = commands.add_parser("kernels", help="list the gateway's kernels")
    kernels.add_argument("--json", action="store_true", help="print JSON")
    stop = commands.add_parser("stop", help="stop a kernel (its records stay)")
    stop.add_argument("kernel", help="kernel name or id prefix")
    gateway = commands.add_parser("gateway", help="control the local gateway")
    gateway.add_argument("action", choices=["start", "stop", "status", "logs"])
    gateway.add_argument("--port", type=int, help="port for start (default 8787)")
    gateway.add_argument("--foreground", action="store_true", help="start: stay attached")
    gateway.add_argument("--follow", "-f", action="store_true", help="logs: keep following")
    return top


def main(argv: list[str] | None = None) -> int:
    """Run one command; return the exit status (0 ok, 1 the cell raised, 2 usage/connection)."""
    args = parser().parse_args(argv)
    try:
        if args.command == "gateway":
            return gateway_command(args)
        return asyncio.run(dispatch(args))
    except (UsageError, GatewayError, GatewayConfigError) as e:
        print(f"loomgate: {e}", file=sys.stderr)
        return 2


async def dispatch(args: argparse.Namespace) -> int:
    """Return the exit status of a command that talks to a gateway."""
    target = select_gateway(args.gateway, os.environ)
    client = await connect(target, autostart=not args.no_autostart)
    try:
        if args.command == "run":
            return await run_cell(client, args)
        if args.command == "kernels":
            kernels = (await client.list_kernels())["kernels"]
            if args.json:
                print(json.dumps(kernels, indent=2))
            else:
                print(render_kernels(kernels, None, client.label))
            return 0
        stopped = (await client.stop_kernel(args.kernel))["kernel"]
        print(f"stopped {stopped.get('name') or stopped['id'][:8]}")
        return 0
    finally:
        await client.aclose()


def cell_source(args: argparse.Namespace) -> str:
    """Return the cell to run, from the argument, stdin (-) or --file."""
    if args.file is not None:
        if args.code is not None:
            raise UsageError("give the cell as an argument or with --file, not both")
        try:
            return args.file.read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot read {args.file}: {e.strerror}") from None
    if args.code is None:
        raise UsageError("no cell given: loomgate run CODE, run - (stdin) or run --file F")
    return sys.stdin.read() if args.code == "-" else str(args.code)


async def bound_kernel(client: GatewayClient, name: str | None) -> str:
    """Return the id of the kernel to run on: --kernel, else the persistent `default` one."""
    if name:
        kernel = (await client.get_kernel(name))["kernel"]
        if not kernel["alive"]:
            raise UsageError(f"kernel {name} is no longer running")
        return str(kernel["id"])
    cwd = str(Path.cwd()) if client.on_this_host else None
    kernel, _ = await client.create_kernel(name=DEFAULT_KERNEL, lifetime="persistent", cwd=cwd)
    return str(kernel["id"])


async def run_cell(client: GatewayClient, args: argparse.Namespace) -> int:
    """Run the cell, printing its lines as they arrive; Ctrl-C interrupts, twice detaches."""
    code = cell_source(args)
    kernel = await bound_kernel(client, args.kernel)
    try:
        execution = (await client.submit(kernel, code))["execution"]
    except GatewayError as e:
        if e.code == "busy":
            raise UsageError(
                f"the kernel is busy running In [{e.details.get('running')}]; "
                "wait for it or run `loomgate interrupt`"
            ) from None
        raise
    number = execution["number"]
    interrupts = 0
    loop = asyncio.get_running_loop()
    pressed = asyncio.Event()

    def on_sigint() -> None:
        nonlocal interrupts
        interrupts += 1
        pressed.set()

    loop.add_signal_handler(signal.SIGINT, on_sigint)
    printer = LinePrinter(number, live=not args.json)
    try:
        while True:
            if interrupts == 1 and pressed.is_set():
                pressed.clear()
                await client.interrupt(kernel)
                print("^C interrupting; press Ctrl-C again to detach", file=sys.stderr)
            if interrupts >= 2:
                print(
                    f"detached: In [{number}] keeps running; follow it with "
                    f"`loomgate wait {number}`",
                    file=sys.stderr,
                )
                return 1
            response = await client.execution(kernel, number, wait=POLL_SECONDS)
            execution = response["execution"]
            await printer.catch_up(client, kernel, final=execution["state"] in FINAL)
            if execution["state"] in FINAL:
                break
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if args.json:
        output = await client.read(kernel, number, "combined", None)
        print(json.dumps({"execution": execution, "lines": output["lines"]}, indent=2))
    elif execution["state"] not in ("completed", "error"):
        print(f"[{execution['state']} after {format_elapsed(execution['elapsed'])}]")
    return 0 if execution["state"] == "completed" else 1


class LinePrinter:
    """Prints an execution's combined lines once each, as the model would see them."""

    def __init__(self, number: int, *, live: bool) -> None:
        self.number = number
        self.live = live
        self.printed = 0

    async def catch_up(self, client: GatewayClient, kernel: str, *, final: bool) -> None:
        """Print the complete lines that arrived since the last call (all of them when final)."""
        if not self.live:
            return
        response = await client.read(kernel, self.number, "combined", f"{self.printed + 1}:")
        lines: list[dict[str, Any]] = response["lines"]
        for position, line in enumerate(lines):
            if line.get("partial") and not final:
                break
            following = lines[position + 1] if position + 1 < len(lines) else None
            print(self.render(line, following), flush=True)
            self.printed = line["n"]

    def render(self, line: dict[str, Any], following: dict[str, Any] | None) -> str:
        """Return one line as the model would read it (Out[N]: on results)."""
        text = line["text"] + clipped_suffix(line)
        if line.get("kind") == "result" and line.get("start"):
            continues = following is not None and following.get("kind") == "result"
            continues = continues and not following.get("start")
            return f"Out[{self.number}]:\n{text}" if continues else f"Out[{self.number}]: {text}"
        if line.get("kind") == "rich" and line.get("start"):
            return f"[rich output: {text}]"
        return text


def gateway_command(args: argparse.Namespace) -> int:
    """Start, stop, inspect or tail the local gateway; return the exit status."""
    directory = state_dir()
    info = read_gateway_file(directory)
    running = info is not None and process_alive(info["pid"])
    if args.action == "status":
        if not running or info is None:
            print("no local gateway is running")
            return 1
        started = (directory / "gateway.json").stat().st_mtime
        print(
            f"url: {info['url']}\npid: {info['pid']}\nversion: {info['version']}\n"
            f"uptime: {format_elapsed(time.time() - started)}\nstate dir: {directory}"
        )
        return 0
    if args.action == "logs":
        return show_logs(directory / "gateway.log", follow=args.follow)
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
    command = [sys.executable, "-m", "loomgate.gateway.app", "--state-dir", str(directory)]
    if args.port:
        command += ["--port", str(args.port)]
    if args.foreground:
        os.execv(sys.executable, command)
    return asyncio.run(start_in_background(args.port, args.no_autostart))


async def start_in_background(port: int | None, no_autostart: bool) -> int:
    """Start the local gateway as a detached daemon and wait until it answers."""
    if no_autostart:
        raise UsageError("--no-autostart forbids starting the gateway")
    target = select_gateway(None, {})
    if port:
        target = dataclasses.replace(target, url=f"http://127.0.0.1:{port}")
    client = await connect(target, autostart=True)
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


if __name__ == "__main__":
    sys.exit(main())
