"""`loomgate run`: a cell run from the shell, its lines printed as they arrive."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path

from loomgate.shared import wire
from loomgate.shared.wire import FINAL_STATES
from loomgate.translator.cli.answers import Answers
from loomgate.translator.cli.errors import UsageError
from loomgate.translator.cli.kernel_commands import DEFAULT_KERNEL, set_up
from loomgate.translator.client.errors import Busy, Conflict, NotFound
from loomgate.translator.client.gateway import GatewayClient, runs_under
from loomgate.translator.client.jupyter_servers import is_notebook_path
from loomgate.translator.client.startup_files import is_theirs
from loomgate.translator.presentation import (
    busy_refusal,
    clipped_suffix,
    format_elapsed,
    input_ended_note,
    left_out_notes,
    no_notebook_kernel,
    opened_line,
    output_line,
    sandbox_mismatch,
    sandbox_rule_line,
    sandbox_summary,
    unconfined_refusal,
)

POLL_SECONDS = 0.2
DETACHED = 3  # the exit status when a second Ctrl-C left the cell running


def cell_source(args: argparse.Namespace) -> str:
    """Return the cell to run, from the argument, stdin (-) or --file."""
    if args.file is not None:
        if args.code is not None:
            raise UsageError("give the cell as an argument or with --file, not both")
        path: Path = args.file
        try:
            return path.read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot read {args.file}: {e.strerror}") from None
    if args.code is None:
        raise UsageError("no cell given: loomgate run CODE, run - (stdin) or run --file F")
    return sys.stdin.read() if args.code == "-" else str(args.code)


async def bound_kernel(
    client: GatewayClient,
    name: str | None,
    sandbox: str | None = None,
    kernel_spec: str | None = None,
) -> str:
    """Return the id of the kernel to run on (--kernel, else `default`), started as a named
    persistent kernel (under the profile `sandbox`, of `kernel_spec`, when given) when none by
    that name runs; either way it gets the user's setup."""
    chosen = name or DEFAULT_KERNEL
    kernel: wire.Kernel | None = None
    try:
        found = await client.get_kernel(chosen)
        kernel = found if found["alive"] else None
    except NotFound:
        pass
    if kernel is not None and sandbox is not None and not runs_under(kernel, sandbox):
        if kernel["name"] != chosen:  # named by its id or notebook: no name to create it by
            raise UsageError(sandbox_mismatch(kernel, sandbox, "person"))
        kernel = await created_kernel(client, chosen, sandbox, kernel_spec)  # its 409 says why not
    if kernel is None:
        if is_notebook_path(chosen):
            raise UsageError(no_notebook_kernel(chosen, client.label, "person"))
        print(f"starting kernel {chosen!r} on {client.label} …", file=sys.stderr, flush=True)
        kernel = await created_kernel(client, chosen, sandbox, kernel_spec)
        if kernel.get("sandbox") is not None:
            print(f"sandbox: {sandbox_summary(kernel.get('sandbox'))}", file=sys.stderr)
        theirs, started = False, True
    else:
        if kernel_spec is not None and kernel["kernel_spec"] != kernel_spec:
            # The gateway refuses it in one sentence, naming the spec the kernel runs.
            await created_kernel(client, chosen, sandbox, kernel_spec)
        theirs, started = is_theirs(kernel, client.mode), False
    await set_up(client, kernel["id"], theirs=theirs, started=started)
    return kernel["id"]


async def created_kernel(
    client: GatewayClient, name: str, sandbox: str | None, kernel_spec: str | None = None
) -> wire.Kernel:
    """Return the persistent kernel `name` as the gateway started (or found) it, under the
    profile `sandbox` and of `kernel_spec` when given: the person may choose any profile,
    looser than the default too."""
    cwd = str(Path.cwd()) if client.on_this_host else None
    reply = await client.create_kernel(
        name=name,
        kernel_spec=kernel_spec,
        lifetime="persistent",
        cwd=cwd,
        sandbox=sandbox,
        stricter_only=False if sandbox is not None else None,
    )
    kernel = reply["kernel"]
    if sandbox is not None and not runs_under(kernel, sandbox):
        if not reply["created"]:
            raise UsageError(sandbox_mismatch(kernel, sandbox, "person"))
        # A gateway from before sandboxes ignores the profile: never run it less confined.
        await client.stop_kernel(kernel["id"])
        raise UsageError(unconfined_refusal(client.where, sandbox, "person"))
    return kernel


async def run_command(client: GatewayClient, args: argparse.Namespace) -> int:
    """Run the cell, printing its lines as they arrive and answering its input() from stdin;
    Ctrl-C interrupts, twice detaches."""
    code = cell_source(args)
    ref = await bound_kernel(
        client, args.kernel, getattr(args, "sandbox", None), getattr(args, "kernel_spec", None)
    )
    if getattr(args, "open_to_agents", False):
        print(opened_line(await client.open_to_agents(ref)), file=sys.stderr)
    try:
        execution = (await client.submit(ref, code))["execution"]
    except Busy as e:
        raise UsageError(
            busy_refusal(e.details.get("running"), "person", e.details.get("setup"))
        ) from None
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
    answers = Answers()
    if printer.live:
        print(f"In [{number}]:", flush=True)  # the model's header; its elapsed time comes last
    try:
        while True:
            if interrupts == 1 and pressed.is_set():
                pressed.clear()
                await client.interrupt(ref)
                print("^C interrupting; press Ctrl-C again to detach", file=sys.stderr)
            if interrupts >= 2:
                print(
                    f"detached: In [{number}] keeps running; follow it with "
                    f"`loomgate wait {number}`",
                    file=sys.stderr,
                )
                return DETACHED
            response = await client.execution(ref, number, wait=POLL_SECONDS)
            execution = response["execution"]
            await printer.catch_up(client, ref, final=execution["state"] in FINAL_STATES)
            if execution["state"] in FINAL_STATES:
                break
            request = execution["input"]
            if execution["state"] == "awaiting_input" and request is not None:
                await answer_input(client, ref, number, request, answers, pressed)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    if args.json:
        output = await client.read(ref, number, "combined")
        print(json.dumps({"execution": execution, "lines": output["lines"]}, indent=2))
    else:
        failure = execution.get("sandbox_failure")
        if failure is not None:
            sandbox = (await client.get_kernel(ref)).get("sandbox")
            print(sandbox_rule_line(failure, sandbox))
        print(f"[{execution['state']} after {format_elapsed(execution['elapsed'])}]")
    return 0 if execution["state"] == "completed" else 1


async def answer_input(
    client: GatewayClient,
    ref: str,
    number: int,
    request: wire.InputRequest,
    answers: Answers,
    pressed: asyncio.Event,
) -> None:
    """Answer In [`number`]'s input() with a line from stdin, unless the cell stops waiting
    first (answered from another shell or over MCP, or interrupted): the kernel's event stream
    tells, and the caller follows the cell on. When stdin has ended, interrupt the cell (as
    input() raises at the end of its input); Ctrl-C leaves it to the caller."""
    if not answers.ended:
        left = asyncio.Event()
        watch = asyncio.ensure_future(client.left_input(ref, number))
        watch.add_done_callback(lambda task: left_when_told(task, left))
        try:
            value = await answers.answer(request["prompt"], request["password"], pressed, left)
        finally:
            watch.cancel()
        if pressed.is_set():
            return
        if value is not None:
            # Conflict: answered elsewhere (`loomgate input`) meanwhile; it runs on.
            with contextlib.suppress(Conflict):
                await client.send_input(ref, number, value)
            return
        if left.is_set():
            return
    print(input_ended_note(number), file=sys.stderr, flush=True)
    with contextlib.suppress(Conflict):
        await client.interrupt(ref, number)
        await client.left_input(ref, number)


def left_when_told(watch: asyncio.Future[None], left: asyncio.Event) -> None:
    """Set `left` when `watch` (`left_input`) saw the cell stop waiting; a watch that failed
    (the event stream broke) leaves the answer to stdin alone."""
    if not watch.cancelled() and watch.exception() is None:
        left.set()


class LinePrinter:
    """Prints an execution's combined lines once each, as the model would see them; a
    traceback is held until it is whole, to leave out ipykernel's and IPython's own frames."""

    def __init__(self, number: int, *, live: bool) -> None:
        self.number = number
        self.live = live
        self.printed = 0
        self.held: list[wire.Line] = []  # the lines of a traceback read so far

    async def catch_up(self, client: GatewayClient, ref: str, *, final: bool) -> None:
        """Print the complete lines that arrived since the last call (all of them when final)."""
        if not self.live:
            return
        response = await client.read(ref, self.number, "combined", f"{self.printed + 1}:")
        lines = response["lines"]
        for position, line in enumerate(lines):
            if line.get("partial") and not final:
                break
            if self.held and (line.get("kind") != "error" or line.get("start")):
                self.print_held()  # the traceback ended: another line follows it
            self.printed = line["n"]
            if line.get("kind") == "error":
                self.held.append(line)
                continue
            following = lines[position + 1] if position + 1 < len(lines) else None
            print(self.render(line, following), flush=True)
        if final and self.held:
            self.print_held()

    def print_held(self) -> None:
        """Print the traceback held, whole, its ipykernel and IPython frames left out."""
        held, self.held = self.held, []
        left_out = left_out_notes(self.number, held, held[-1]["n"], "person")
        for line in held:
            for shown in left_out.get(line["n"], [self.render(line, None)]):
                print(shown, flush=True)

    def render(self, line: wire.Line, following: wire.Line | None) -> str:
        """Return one line as the model would read it (Out[N]: on results, images named)."""
        if line.get("kind") == "rich" and line.get("start"):
            return f"[rich output: {line['text']}{clipped_suffix(line)}]"
        return output_line(self.number, line, following)
