"""`loomgate stream`: a delimiter-framed stdin/stdout protocol for token-reading clients."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
from pathlib import Path

from loomgate.shared import wire
from loomgate.shared.wire import FINAL_STATES
from loomgate.translator.cli.kernel_commands import existing_kernel, finished, set_up
from loomgate.translator.client.errors import Busy, Conflict, GatewayError
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.hold import Hold
from loomgate.translator.presentation import busy_refusal, cell_text, render_running

# The request lines that are not cells (none of them is valid Python on its own).
CELL = "--"  # a multi-line cell follows, up to the delimiter
ANSWER = "--input"  # the next line answers the input() the last cell waits in
INTERRUPT = "--interrupt"  # interrupt the cell waiting for input
STREAM_ANSWER = f"Answer with a line `{ANSWER}`, then the answer's line; or a line `{INTERRUPT}`."


async def stream_session(
    client: GatewayClient, kernel_name: str | None, kernel_spec: str | None = None
) -> int:
    """Serve the delimiter-framed protocol on stdin/stdout until `exit` or end of input (the
    session's own kernel of `kernel_spec`, when given)."""
    delimiter = f"@@loomgate-{secrets.token_hex(12)}@@"
    if kernel_name:
        ref = await existing_kernel(client, kernel_name)
        owned = False
    else:
        cwd = str(Path.cwd()) if client.on_this_host else None
        created = await client.create_kernel(
            lifetime="conversation", cwd=cwd, kernel_spec=kernel_spec
        )
        ref, owned = created["kernel"]["id"], True
    hold = Hold(client, ref) if owned else None
    if hold is not None:
        await hold.open()
    await set_up(client, ref, started=owned)
    write = sys.stdout.write
    write(
        "loomgate stream: one line is one cell. For a multi-line cell send a line `--`, the "
        f"cell, then a line `{delimiter}`. Each request is acknowledged with `.`; each response "
        f"ends with a line `{delimiter}`. A cell waiting in input() answers with a line `In [N] "
        f"is waiting for input …`; send a line `{ANSWER}` and then the answer's line, or a line "
        f"`{INTERRUPT}`. `exit` or end of input ends the session.\n"
        f"{delimiter}\n"
    )
    sys.stdout.flush()
    waiting: int | None = None  # the execution waiting for input, as the last response said
    try:
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line or line.rstrip("\n") == "exit":
                return 0
            code = line.rstrip("\n")
            if code in (ANSWER, INTERRUPT):
                answer = await asyncio.to_thread(sys.stdin.readline) if code == ANSWER else None
                write(".\n")
                sys.stdout.flush()
                reply, waiting = await stream_answer(client, ref, waiting, answer)
                write(f"{reply}\n{delimiter}\n")
                sys.stdout.flush()
                continue
            if code == CELL:
                body: list[str] = []
                while True:
                    more = await asyncio.to_thread(sys.stdin.readline)
                    if not more or more.rstrip("\n") == delimiter:
                        break
                    body.append(more.rstrip("\n"))
                code = "\n".join(body)
            write(".\n")
            sys.stdout.flush()
            if code.strip():
                reply, waiting = await stream_cell(client, ref, code, waiting)
                write(reply + "\n")
            write(f"{delimiter}\n")
            sys.stdout.flush()
    finally:
        if hold is not None:
            await hold.aclose()
        if owned:
            await client.stop_kernel(ref)


async def stream_cell(
    client: GatewayClient, ref: str, code: str, waiting: int | None
) -> tuple[str, int | None]:
    """Run one cell of the stream protocol to its end or its input(); return its text, and
    the number of the cell waiting for input, if one is (`waiting`: as the last one said)."""
    try:
        number = (await client.submit(ref, code))["execution"]["number"]
    except Busy as e:
        if waiting is not None and e.details.get("running") == waiting:
            note = f"error: In [{waiting}] is waiting for input; the cell was not run."
            return f"{note} {STREAM_ANSWER}", waiting
        return f"error: {busy_refusal(e.details.get('running'), 'person')}", None
    except GatewayError as e:
        return f"error: {e}", None
    return stream_text(await finished(client, ref, number))


async def stream_answer(
    client: GatewayClient, ref: str, waiting: int | None, answer: str | None
) -> tuple[str, int | None]:
    """Answer (or, with no `answer`, interrupt) the cell waiting for input; return the cell's
    text once it ends or asks again, and its number when it waits for input."""
    if waiting is None:
        return "error: no cell is waiting for input", None
    try:
        # Conflict: it no longer waits (answered or ended elsewhere); say how it is now.
        with contextlib.suppress(Conflict):
            if answer is None:
                await client.interrupt(ref)
                await client.left_input(ref, waiting)
            else:
                await client.send_input(ref, waiting, answer.removesuffix("\n"))
    except GatewayError as e:
        return f"error: {e}", waiting
    return stream_text(await finished(client, ref, waiting))


def stream_text(execution: wire.Execution) -> tuple[str, int | None]:
    """Return an execution's response text, and its number when it waits for input."""
    if execution["state"] in FINAL_STATES:
        return cell_text(execution), None
    output = execution.get("output")
    last = [*output["head"], *output["tail"]] if output else []
    return render_running(execution, last, "person", STREAM_ANSWER), execution["number"]
