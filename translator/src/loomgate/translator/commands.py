"""`loomgate`: the person's command line (run, kernels, stop, gateway control)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from loomgate.shared.wire import FINAL_STATES
from loomgate.translator.autostart import connect
from loomgate.translator.gateway_client import GatewayClient, GatewayError
from loomgate.translator.gateway_control import UsageError, gateway_command
from loomgate.translator.gateway_selection import GatewayConfigError, select_gateway
from loomgate.translator.kernel_views import (
    DEFAULT_KERNEL,
    cell_text,
    existing_kernel,
    finished,
)
from loomgate.translator.presentation import (
    clipped_suffix,
    format_elapsed,
    render_kernels,
    render_read,
    render_search,
)
from loomgate.translator.stream_protocol import stream_session

POLL_SECONDS = 0.2
STREAMS = ["combined", "stdout", "stderr", "result", "traceback"]
STOP_TIMEOUT = 30.0


def parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
    top = argparse.ArgumentParser(
        prog="loomgate", description="Persistent Jupyter kernels from the shell."
    )
    top.add_argument("--gateway", help="a gateways.toml name or a URL (default: local)")
    top.add_argument("--no-autostart", action="store_true", help="never start the local gateway")
    # The same options after the command name (`loomgate stream --gateway lab`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--gateway", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    common.add_argument(
        "--no-autostart", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
    )
    commands = top.add_subparsers(dest="command", required=True)
    original_add_parser = commands.add_parser

    def add_parser(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return original_add_parser(name, parents=[common], **kwargs)

    commands.add_parser = add_parser  # type: ignore[method-assign]
    run = commands.add_parser("run", help="run a cell and stream its output")
    run.add_argument("code", nargs="?", help="the cell, or - to read it from stdin")
    run.add_argument("--file", type=Path, help="read the cell from this file")
    run.add_argument("--kernel", help=f"kernel name or id prefix (default: {DEFAULT_KERNEL!r})")
    run.add_argument("--json", action="store_true", help="print the record as JSON at the end")
    output = commands.add_parser("output", help="read lines of an execution's output")
    output.add_argument("execution", nargs="?", help="execution number (default: latest)")
    output.add_argument("--lines", help='"start:stop", e.g. ":10", "-20:", "100:120"')
    output.add_argument("--stream", default="combined", choices=STREAMS)
    output.add_argument("--json", action="store_true", help="print JSON")
    search = commands.add_parser("search", help="find lines in the output of executions")
    search.add_argument("query")
    search.add_argument("--execution", default="all", help='a number or "all" (default)')
    search.add_argument("--stream", default="combined", choices=STREAMS)
    search.add_argument("--mode", default="auto", choices=["auto", "literal", "regex"])
    search.add_argument("--context", type=int, default=0)
    search.add_argument("--ignore-case", "-i", action="store_true")
    search.add_argument("--max-matches", type=int, default=50)
    wait = commands.add_parser("wait", help="wait for an execution and show it")
    wait.add_argument("execution", nargs="?", help="execution number (default: running/latest)")
    commands.add_parser("interrupt", help="interrupt the running execution")
    commands.add_parser("reset", help="restart the kernel, keeping records and numbering")
    stream = commands.add_parser("stream", help="the delimiter-framed protocol on stdin/stdout")
    for sub in (output, search, wait, stream):
        sub.add_argument("--kernel", help=f"kernel name or id prefix (default: {DEFAULT_KERNEL!r})")
    for name in ("interrupt", "reset"):
        commands.choices[name].add_argument("--kernel", help="kernel name or id prefix")
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
        if args.command == "stream":
            return await stream_session(client, args.kernel)
        if args.command in READERS:
            return await READERS[args.command](client, args)
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
    try:
        current = (await client.get_kernel(DEFAULT_KERNEL))["kernel"]
        if current["alive"]:
            return str(current["id"])
    except GatewayError as e:
        if e.code != "not_found":
            raise
    print(f"starting kernel {DEFAULT_KERNEL!r} on {client.label} …", file=sys.stderr, flush=True)
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
            running = e.details.get("running")
            if running is None:
                raise UsageError("the kernel is busy starting another cell; try again") from None
            raise UsageError(
                f"the kernel is busy running In [{running}]; "
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
    if printer.live:
        print(f"In [{number}]:", flush=True)  # the model's header; its elapsed time comes last
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
            await printer.catch_up(client, kernel, final=execution["state"] in FINAL_STATES)
            if execution["state"] in FINAL_STATES:
                break
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if args.json:
        output = await client.read(kernel, number, "combined", None)
        print(json.dumps({"execution": execution, "lines": output["lines"]}, indent=2))
    else:
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


async def show_output(client: GatewayClient, args: argparse.Namespace) -> int:
    """Print a line range of one stream (as read_output shows it)."""
    kernel = await existing_kernel(client, args.kernel)
    response = await client.read(kernel, args.execution or "latest", args.stream, args.lines)
    print(json.dumps(response, indent=2) if args.json else render_read(response))
    return 0


async def show_search(client: GatewayClient, args: argparse.Namespace) -> int:
    """Print matching lines (as search_output shows them); exit 1 when nothing matched."""
    kernel = await existing_kernel(client, args.kernel)
    response = await client.search(
        kernel,
        args.query,
        execution=args.execution,
        stream=args.stream,
        mode=args.mode,
        context=args.context,
        ignore_case=args.ignore_case,
        max_matches=args.max_matches,
    )
    scope = "all executions" if args.execution == "all" else f"In [{args.execution}]"
    print(render_search(response, scope))
    return 0 if response["matches"] else 1


async def show_wait(client: GatewayClient, args: argparse.Namespace) -> int:
    """Wait for an execution to end and print it as the model would read it."""
    kernel = await existing_kernel(client, args.kernel)
    execution = await finished(client, kernel, args.execution or "current")
    print(cell_text(execution))
    return 0 if execution["state"] == "completed" else 1


async def show_interrupt(client: GatewayClient, args: argparse.Namespace) -> int:
    """Interrupt the running execution."""
    kernel = await existing_kernel(client, args.kernel)
    try:
        execution = (await client.interrupt(kernel))["execution"]
    except GatewayError as e:
        if e.code == "conflict":
            print("nothing is running")
            return 0
        raise
    print(f"interrupted In [{execution['number']}]")
    return 0


async def show_reset(client: GatewayClient, args: argparse.Namespace) -> int:
    """Restart the kernel: variables cleared, records and numbering kept."""
    kernel = await existing_kernel(client, args.kernel)
    response = await client.reset(kernel)
    killed = response.get("killed")
    print(
        "reset: variables cleared; records and numbering kept"
        + (f"; In [{killed['number']}] was killed" if killed else "")
    )
    return 0


READERS = {
    "output": show_output,
    "search": show_search,
    "wait": show_wait,
    "interrupt": show_interrupt,
    "reset": show_reset,
}


if __name__ == "__main__":
    sys.exit(main())
