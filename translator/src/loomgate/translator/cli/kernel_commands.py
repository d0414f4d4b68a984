"""The shell commands that read and manage kernels, and the kernel each one acts on.

output, search, wait, input, interrupt, reset, kernels and stop.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys

from loomgate.shared import wire
from loomgate.shared.wire import FINAL_STATES
from loomgate.translator.cli.errors import UsageError
from loomgate.translator.client.errors import Conflict, Uninspected
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.startup_files import StartupFiles
from loomgate.translator.output_view import OutputLimits
from loomgate.translator.presentation import (
    cell_text,
    checkpoint_note,
    fork_lines,
    kernel_label,
    not_waiting_for_input,
    opened_line,
    past_the_end,
    render_kernels,
    render_read,
    render_running,
    render_search,
    render_setup,
    render_unattached,
    rollback_note,
    uninspected_refusal,
)

DEFAULT_KERNEL = "default"
OUTPUT_LIMITS = OutputLimits()
INTERRUPT_WAIT = 10.0  # how long `loomgate interrupt` waits for the cell to end


async def existing_kernel(client: GatewayClient, name: str | None) -> str:
    """Return the id of --kernel, else of the `default` kernel (which must exist)."""
    return (await client.get_kernel(name or DEFAULT_KERNEL))["id"]


async def set_up(
    client: GatewayClient, kernel_id: str, *, theirs: bool = False, started: bool = False
) -> None:
    """Give the kernel the user's startup.py and inspectors (they stay, and run again after
    every restart; only the inspectors in a kernel of someone's Jupyter, `theirs`), printing
    to stderr what running them now printed or how it failed; a kernel refused for not
    running inspectors.py is stopped when this command `started` it (Uninspected)."""
    setup = StartupFiles.from_config()
    try:
        reply = await (setup.inspectors_only() if theirs else setup).install(client, kernel_id)
    except Uninspected as refused:
        if started:
            await client.stop_kernel(kernel_id)
        raise Uninspected(uninspected_refusal(refused.message, stopped=started)) from None
    if reply is not None and reply["ran"]:
        report = render_setup(reply["setup"]["results"])
        if report:
            print(report, file=sys.stderr, flush=True)


async def finished(client: GatewayClient, ref: str, selector: str | int) -> wire.Execution:
    """Return the execution once it has ended (or asks for input), with its head and tail."""
    while True:
        response = await client.execution(
            ref,
            selector,
            wait=3600,
            head=OUTPUT_LIMITS.half_lines,
            tail=OUTPUT_LIMITS.half_lines,
            max_chars=OUTPUT_LIMITS.max_chars,
        )
        execution = response["execution"]
        if execution["state"] in FINAL_STATES or response["returned"] == "input":
            return execution


async def show_output(client: GatewayClient, args: argparse.Namespace) -> int:
    """Print a line range of one stream (as read_output shows it)."""
    ref = await existing_kernel(client, args.kernel)
    response = await client.read(
        ref, "latest" if args.execution is None else args.execution, args.stream, args.lines
    )
    refusal = past_the_end(response, "person")
    if refusal is not None:
        raise UsageError(refusal)
    print(json.dumps(response, indent=2) if args.json else render_read(response, audience="person"))
    return 0


async def show_search(client: GatewayClient, args: argparse.Namespace) -> int:
    """Print matching lines (as search_output shows them); exit 1 when nothing matched."""
    ref = await existing_kernel(client, args.kernel)
    response = await client.search(
        ref,
        args.query,
        selector=args.execution,
        stream=args.stream,
        mode=args.mode,
        context=args.context,
        ignore_case=args.ignore_case,
        max_matches=args.max_matches,
    )
    scope = "all executions" if args.execution == "all" else f"In [{args.execution}]"
    print(render_search(response, scope, audience="person"))
    return 0 if response["matches"] else 1


async def show_wait(client: GatewayClient, args: argparse.Namespace) -> int:
    """Wait for an execution to end and print it as the model would read it."""
    ref = await existing_kernel(client, args.kernel)
    execution = await finished(client, ref, "current" if args.execution is None else args.execution)
    return await print_cell(client, ref, execution)


async def print_cell(client: GatewayClient, ref: str, execution: wire.Execution) -> int:
    """Print an ended execution as the model would read it, or one waiting for input with how
    to answer it; return the exit status (0 only for a completed cell)."""
    if execution["state"] not in FINAL_STATES:
        output = execution.get("output")
        last = [*output["head"], *output["tail"]] if output else []
        print(render_running(execution, last, "person"))
        return 1
    sandbox = None
    if execution.get("sandbox_failure") is not None:  # its line names the limit or places
        sandbox = (await client.get_kernel(ref)).get("sandbox")
    print(cell_text(execution, sandbox=sandbox))
    return 0 if execution["state"] == "completed" else 1


async def show_input(client: GatewayClient, args: argparse.Namespace) -> int:
    """Answer the input() an execution waits in, then follow it as `wait` does."""
    *selector, text = args.words
    if len(selector) > 1:
        raise UsageError("loomgate input takes [N] TEXT: an execution number, then the answer")
    if selector and not selector[0].isdigit():
        raise UsageError(f"{selector[0]!r} is not an execution number (loomgate input [N] TEXT)")
    ref = await existing_kernel(client, args.kernel)
    if text == "-":  # the answer from stdin: a password stays off the command line
        text = typed_answer()
    try:
        sent = await client.send_input(ref, selector[0] if selector else "current", text)
    except Conflict as e:
        number, state = e.details.get("number"), e.details.get("state")
        raise UsageError(not_waiting_for_input(number, state)) from None
    return await print_cell(client, ref, await finished(client, ref, sent["number"]))


def typed_answer() -> str:
    """Return the answer given on stdin: typed without echo at a terminal, else its first line."""
    if os.isatty(sys.stdin.fileno()):
        return getpass.getpass("answer: ")
    return sys.stdin.readline().removesuffix("\n")


async def show_interrupt(client: GatewayClient, args: argparse.Namespace) -> int:
    """Interrupt the running execution and wait (up to INTERRUPT_WAIT) for it to end; a cell
    that did not end interrupted (its code caught the KeyboardInterrupt) is shown as it is."""
    ref = await existing_kernel(client, args.kernel)
    try:
        execution = await client.interrupt(ref)
    except Conflict:
        print("nothing is running")
        return 0
    response = await client.execution(
        ref,
        execution["number"],
        wait=INTERRUPT_WAIT,
        head=OUTPUT_LIMITS.half_lines,
        tail=OUTPUT_LIMITS.half_lines,
        max_chars=OUTPUT_LIMITS.max_chars,
    )
    if response["execution"]["state"] != "interrupted":
        return await print_cell(client, ref, response["execution"])
    print(f"interrupted In [{execution['number']}]")
    return 0


async def show_reset(client: GatewayClient, args: argparse.Namespace) -> int:
    """Restart the kernel: variables cleared, records and numbering kept."""
    ref = await existing_kernel(client, args.kernel)
    response = await client.reset(ref)
    killed = response["killed"]
    print(
        "reset: variables cleared; records and numbering kept"
        + (f"; In [{killed['number']}] was killed" if killed else "")
    )
    return 0


async def checkpoint(client: GatewayClient, args: argparse.Namespace) -> int:
    """Keep a frozen copy of the kernel's state under a name."""
    ref = await existing_kernel(client, args.kernel)
    reply = await client.checkpoint(ref, args.name)
    print(checkpoint_note(kernel_label(reply["kernel"]), reply))
    return 0


async def rollback(client: GatewayClient, args: argparse.Namespace) -> int:
    """Make the kernel's state a checkpoint's again."""
    ref = await existing_kernel(client, args.kernel)
    reply = await client.rollback(ref, args.name)
    print(rollback_note(kernel_label(reply["kernel"]), reply["checkpoint"]))
    return 0


async def fork(client: GatewayClient, args: argparse.Namespace) -> int:
    """Start a new kernel as a copy of another's state, or of one of its checkpoints."""
    reply = await client.create_kernel(name=args.new, fork=args.origin)
    print("\n".join([f"started {kernel_label(reply['kernel'])}", *fork_lines(reply["kernel"])]))
    return 0


async def show_kernels(client: GatewayClient, args: argparse.Namespace) -> int:
    """Print the gateway's kernels and those of the person's Jupyter servers (tables, or
    JSON)."""
    from loomgate.translator.cli.jupyter import other_servers, render_others

    found = await client.kernel_list(all=args.all)
    kernels = found["kernels"]
    others = [] if args.gateway else await other_servers(client)
    if args.json:
        # One list, as always; each kernel says which gateway (or Jupyter server) runs it.
        listing = [{**kernel, "gateway": client.label} for kernel in kernels]
        for other in others:
            listing += [{**k, "gateway": other.server.name} for k in other.kernels or []]
        print(json.dumps(listing, indent=2))
    else:
        sections = [render_kernels(kernels, None, client.label)]
        if found["unattached"]:
            sections.append(render_unattached(found["unattached"], client.label))
        print("\n\n".join([*sections, *render_others(others)]))
    return 0


async def agents(client: GatewayClient, args: argparse.Namespace) -> int:
    """Open a kernel to agents, or close it."""
    kernel = await client.open_to_agents(args.kernel, args.action == "open")
    print(opened_line(kernel))
    return 0


async def stop(client: GatewayClient, args: argparse.Namespace) -> int:
    """Stop a kernel (its records stay)."""
    print(f"stopped {kernel_label(await client.stop_kernel(args.kernel))}")
    return 0
