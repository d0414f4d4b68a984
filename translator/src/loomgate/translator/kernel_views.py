"""The kernel a shell command acts on, and a finished cell as the model would read it."""

from __future__ import annotations

from typing import Any

from loomgate.shared.wire import FINAL_STATES
from loomgate.translator.gateway_client import GatewayClient
from loomgate.translator.presentation import CellOutput, OutputLimits, render_cell

DEFAULT_KERNEL = "default"
OUTPUT_LIMITS = OutputLimits()


async def existing_kernel(client: GatewayClient, name: str | None) -> str:
    """Return the id of --kernel, else of the `default` kernel (which must exist)."""
    kernel = (await client.get_kernel(name or DEFAULT_KERNEL))["kernel"]
    return str(kernel["id"])


async def finished(client: GatewayClient, kernel: str, selector: str | int) -> dict[str, Any]:
    """Return the execution once it has ended, with its head and tail lines."""
    while True:
        response = await client.execution(
            kernel,
            selector,
            wait=3600,
            head=OUTPUT_LIMITS.half_lines,
            tail=OUTPUT_LIMITS.half_lines,
            max_chars=OUTPUT_LIMITS.max_chars,
        )
        execution: dict[str, Any] = response["execution"]
        if execution["state"] in FINAL_STATES or response["returned"] == "input":
            return execution


def cell_text(execution: dict[str, Any]) -> str:
    """Return an execution as the model reads it (images named, not shown)."""
    blocks = render_cell(execution, CellOutput.from_gateway(execution.get("output")))
    return "\n".join(
        block if isinstance(block, str) else f"[image {block.index}: {block.mime}]"
        for block in blocks
    )
