"""`loomgate stream`: a delimiter-framed stdin/stdout protocol for token-reading clients."""

from __future__ import annotations

import asyncio
import secrets
import sys
from pathlib import Path

from loomgate.translator.cli.kernel_commands import existing_kernel, finished, set_up
from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.hold import Hold
from loomgate.translator.presentation import cell_text


async def stream_session(client: GatewayClient, kernel_name: str | None) -> int:
    """Serve the delimiter-framed protocol on stdin/stdout until `exit` or end of input."""
    delimiter = f"@@loomgate-{secrets.token_hex(12)}@@"
    if kernel_name:
        kernel = await existing_kernel(client, kernel_name)
        owned = False
    else:
        cwd = str(Path.cwd()) if client.on_this_host else None
        created = await client.create_kernel(lifetime="conversation", cwd=cwd)
        kernel, owned = created["kernel"]["id"], True
    hold = Hold(client, kernel) if owned else None
    if hold is not None:
        await hold.open()
    await set_up(client, kernel)
    write = sys.stdout.write
    write(
        "loomgate stream: one line is one cell. For a multi-line cell send a line `--`, the "
        f"cell, then a line `{delimiter}`. Each request is acknowledged with `.`; each response "
        f"ends with a line `{delimiter}`. `exit` or end of input ends the session.\n"
        f"{delimiter}\n"
    )
    sys.stdout.flush()
    try:
        while True:
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line or line.rstrip("\n") == "exit":
                return 0
            code = line.rstrip("\n")
            if code == "--":
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
                write(await stream_cell(client, kernel, code) + "\n")
            write(f"{delimiter}\n")
            sys.stdout.flush()
    finally:
        if hold is not None:
            await hold.aclose()
        if owned:
            await client.stop_kernel(kernel)


async def stream_cell(client: GatewayClient, kernel: str, code: str) -> str:
    """Run one cell of the stream protocol to its end; return its text."""
    try:
        number = (await client.submit(kernel, code))["execution"]["number"]
    except GatewayError as e:
        return f"error: {e}"
    return cell_text(await finished(client, kernel, number))
