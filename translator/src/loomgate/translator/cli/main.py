"""`loomgate`: the person's command line: the parser, and each command's function."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from loomgate.shared.wire import SEARCH_MODES, STREAMS
from loomgate.translator.cli import kernel_commands
from loomgate.translator.cli.errors import UsageError
from loomgate.translator.cli.export import export_notebook
from loomgate.translator.cli.kernel_commands import DEFAULT_KERNEL
from loomgate.translator.cli.monitor import show_monitor
from loomgate.translator.cli.run import run_command
from loomgate.translator.cli.stream_protocol import stream_session
from loomgate.translator.client.connection import open_client
from loomgate.translator.client.errors import GatewayConfigError, GatewayError
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.selection import select_gateway
from loomgate.translator.client.startup_files import UninspectedSetting

Command = Callable[[GatewayClient, argparse.Namespace], Awaitable[int]]


def parser() -> argparse.ArgumentParser:
    """Return the command-line parser."""
    top = argparse.ArgumentParser(
        prog="loomgate",
        description="Persistent Jupyter kernels from the shell.",
        epilog="Exit status: 0 success, 1 the cell raised (or was interrupted, or `wait` left it "
        "waiting for input), 2 a usage or connection error, 3 `run` detached by a second Ctrl-C "
        "(the cell runs on).",
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
    run = commands.add_parser(
        "run",
        help="run a cell and stream its output; its input() is answered from the terminal "
        "(a password without echo) or piped stdin",
    )
    run.add_argument("code", nargs="?", help="the cell, or - to read it from stdin")
    run.add_argument("--file", type=Path, help="read the cell from this file")
    run.add_argument(
        "--kernel",
        help=f"kernel name, id prefix, or a notebook open in your Jupyter (default: "
        f"{DEFAULT_KERNEL!r}); a name that runs no kernel starts a persistent one by that name",
    )
    run.add_argument(
        "--sandbox",
        metavar="PROFILE",
        help="the sandbox profile --kernel starts under when this run creates it (none, "
        "workspace, strict, or one of sandbox.toml; default: the gateway's); a kernel "
        "already running under another profile is refused",
    )
    run.add_argument(
        "--kernel-spec",
        metavar="NAME",
        help="the kernel spec --kernel starts with when this run creates it (bash, deno, …; "
        "default: the gateway's); a kernel already running another spec is refused",
    )
    run.add_argument(
        "--open-to-agents",
        action="store_true",
        help="open --kernel to agents: a model may use it whatever its sandbox (a kernel looser "
        "than the gateway's default is closed to them otherwise)",
    )
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
    search.add_argument("--mode", default="auto", choices=SEARCH_MODES)
    search.add_argument("--context", type=int, default=0)
    search.add_argument("--ignore-case", "-i", action="store_true")
    search.add_argument("--max-matches", type=int, default=50)
    wait = commands.add_parser("wait", help="wait for an execution and show it")
    wait.add_argument("execution", nargs="?", help="execution number (default: running/latest)")
    answer = commands.add_parser(
        "input", help="answer the input() an execution waits in, then wait for it"
    )
    answer.add_argument(
        "words",
        nargs="+",
        metavar="[N] TEXT",
        help="the execution number (default: the running one) and the answer (- reads it from "
        "stdin, without echo at a terminal: for a password)",
    )
    commands.add_parser("interrupt", help="interrupt the running execution")
    commands.add_parser("reset", help="restart the kernel, keeping records and numbering")
    checkpoint = commands.add_parser(
        "checkpoint", help="keep a frozen copy of the kernel's state, to roll back to"
    )
    checkpoint.add_argument("name", nargs="?", help="its name (default: after-N, N the latest)")
    rollback = commands.add_parser(
        "rollback", help="make the kernel's state a checkpoint's again (records kept)"
    )
    rollback.add_argument("name", help="the checkpoint's name")
    fork = commands.add_parser(
        "fork", help="start a new kernel as a copy of another's state (or of its checkpoint)"
    )
    fork.add_argument("new", help="the new kernel's name")
    fork.add_argument(
        "--from", dest="origin", required=True, metavar="K[@CHECKPOINT]", help="what it copies"
    )
    stream = commands.add_parser("stream", help="the delimiter-framed protocol on stdin/stdout")
    for sub in (output, search, wait, answer):
        sub.add_argument("--kernel", help=f"kernel name or id prefix (default: {DEFAULT_KERNEL!r})")
    stream.add_argument(
        "--kernel",
        help="kernel name or id prefix (default: a kernel of the session's own, stopped after "
        "the grace period once the session ends)",
    )
    stream.add_argument(
        "--kernel-spec",
        metavar="NAME",
        help="the kernel spec of the session's own kernel (default: the gateway's)",
    )
    for name in ("interrupt", "reset", "checkpoint", "rollback"):
        commands.choices[name].add_argument("--kernel", help="kernel name or id prefix")
    kernels = commands.add_parser("kernels", help="list the gateway's kernels")
    kernels.add_argument("--json", action="store_true", help="print JSON")
    kernels.add_argument(
        "--all", action="store_true", help="also stopped kernels, whose records stay readable"
    )
    export = commands.add_parser(
        "export", help="write a kernel's executions as a Jupyter notebook (.ipynb)"
    )
    export.add_argument(
        "--kernel",
        help=f"kernel name, id prefix, or a notebook open in your Jupyter (default: "
        f"{DEFAULT_KERNEL!r}); stopped kernels too, while their records are kept",
    )
    export.add_argument("-o", "--output", help="the .ipynb file to write (default: stdout)")
    export.add_argument(
        "--executions", help='execution numbers "a:b", or "-10:" for the last ten (default: all)'
    )
    export.add_argument(
        "--source",
        choices=("loomgate", "other"),
        help="only cells sent through loomgate, or only those of other Jupyter clients",
    )
    export.add_argument(
        "--client",
        dest="ran_by",
        help='only cells this client ran: "cli", "conversation" (every one) or '
        '"conversation 3f2a9b"',
    )
    export.add_argument(
        "--max-lines",
        type=int,
        help="lines of one cell's output kept, as its head and tail (default 10,000)",
    )
    agents = commands.add_parser(
        "agents",
        help="open a kernel to agents (a model may use it whatever its sandbox), or close it",
    )
    agents.add_argument("action", choices=["open", "close"])
    agents.add_argument("kernel", help="kernel name or id prefix")
    stop = commands.add_parser("stop", help="stop a kernel (its records stay)")
    stop.add_argument("kernel", help="kernel name or id prefix")
    monitor = commands.add_parser(
        "monitor", help="print (and open) the address of the gateway's read-only monitor page"
    )
    monitor.add_argument("--no-browser", action="store_true", help="only print its address")
    jupyter = commands.add_parser(
        "jupyter", help="loomgate inside the person's own JupyterLab / Jupyter Server"
    )
    jupyter.add_argument(
        "action",
        choices=["enable", "disable", "status"],
        help="enable or disable loomgate's server extension in your Jupyter config "
        "($JUPYTER_CONFIG_DIR, else ~/.jupyter); status lists running Jupyter servers",
    )
    jupyter.add_argument(
        "--no-live-cells",
        dest="live_cells",
        action="store_false",
        help="with enable: do not show the agent's cells in the notebooks open on their kernels "
        "(they stay in the records: loomgate export)",
    )
    gateway = commands.add_parser("gateway", help="control the local gateway")
    gateway.add_argument(
        "action",
        choices=[
            "start",
            "stop",
            "restart",
            "status",
            "logs",
            "token",
            "rotate-token",
            "install-service",
        ],
        help="token prints the local gateway's token; rotate-token makes a new one (and "
        "restarts a running gateway, keeping its kernels)",
    )
    gateway.add_argument("--port", type=int, help="port for start (default 8787)")
    gateway.add_argument("--foreground", action="store_true", help="start: stay attached")
    gateway.add_argument(
        "--keep-kernels",
        action="store_true",
        help="stop: leave the kernels running for the next start (restart always does)",
    )
    gateway.add_argument("--follow", "-f", action="store_true", help="logs: keep following")
    gateway.add_argument(
        "--print", action="store_true", help="install-service: print the unit, write nothing"
    )
    return top


def main(argv: list[str] | None = None) -> int:
    """Run one command; return the exit status (0 ok, 1 the cell raised, 2 usage/connection,
    3 detached)."""
    args = parser().parse_args(attached_ranges(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "gateway":
            # Imported here: the gateway's own commands need the service and daemon code,
            # a cell run does not (the CLI's start-up is its import time).
            from loomgate.translator.cli.gateway_control import control_gateway

            return control_gateway(args)
        if args.command == "jupyter":
            from loomgate.translator.cli.jupyter import jupyter_command

            return asyncio.run(jupyter_command(args))
        return asyncio.run(dispatch(args))
    except (UsageError, GatewayError, GatewayConfigError, UninspectedSetting) as e:
        print(f"loomgate: {e}", file=sys.stderr)
        return 2


def attached_ranges(argv: list[str]) -> list[str]:
    """Return `argv` with a `--lines` or `--executions` range that starts with a minus
    (`-20:`) attached to it (`--lines=-20:`): argparse would take it for an option."""
    out: list[str] = []
    for word in argv:
        ranged = out and out[-1] in ("--lines", "--executions")
        if ranged and word[:1] == "-" and word[1:2].isdigit():
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


async def stream(client: GatewayClient, args: argparse.Namespace) -> int:
    """Serve the stream protocol until its end."""
    return await stream_session(client, args.kernel, args.kernel_spec)


COMMANDS: dict[str, Command] = {
    "run": run_command,
    "stream": stream,
    "output": kernel_commands.show_output,
    "search": kernel_commands.show_search,
    "wait": kernel_commands.show_wait,
    "input": kernel_commands.show_input,
    "interrupt": kernel_commands.show_interrupt,
    "reset": kernel_commands.show_reset,
    "checkpoint": kernel_commands.checkpoint,
    "rollback": kernel_commands.rollback,
    "fork": kernel_commands.fork,
    "kernels": kernel_commands.show_kernels,
    "stop": kernel_commands.stop,
    "agents": kernel_commands.agents,
    "monitor": show_monitor,
    "export": export_notebook,
}


async def dispatch(args: argparse.Namespace) -> int:
    """Return the exit status of a command that talks to a gateway."""
    target = select_gateway(args.gateway, os.environ)
    client = await open_client(target, autostart=not args.no_autostart)
    client.client_label = "cli"
    if getattr(args, "kernel", None) and args.command != "stop":
        from loomgate.translator.cli.jupyter import client_with_kernel

        client = await client_with_kernel(client, args.kernel, args.gateway is not None)
    try:
        return await COMMANDS[args.command](client, args)
    finally:
        await client.aclose()
