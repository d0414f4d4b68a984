"""Following an execution: long-polls with progress, input dialogs in both eras, cell results."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from mcp.server.elicitation import AcceptedElicitation, render_elicitation_schema
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ImageContent,
    InputRequiredResult,
    TextContent,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from loomgate.shared.wire import FINAL_STATES
from loomgate.translator.gateway_client import GatewayClient
from loomgate.translator.presentation import (
    Block,
    CellOutput,
    Image,
    render_cell,
    render_running,
)
from loomgate.translator.results import CellResult, tool_result
from loomgate.translator.session import Conversation

log = logging.getLogger("loomgate.translator")

SLICE_SECONDS = 1.0  # a long wait is cut into slices, each one reporting progress
INPUT_WAIT = 10.0
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 4 << 20
FULL_READ_LINES = 10_000


class InputValue(BaseModel):
    """What the input dialog asks the person for."""

    value: str = Field(description="the text to give to input()")


class NeedsInput(Exception):
    """The cell waits for input and the host answers through an input-required result."""

    def __init__(self, result: InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


def text_block(text: str) -> TextContent:
    """Return a text content block."""
    return TextContent(type="text", text=text)


class CellFollower:
    """Follows one conversation's executions: waits, input dialogs, and the cell results."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.settings = conversation.settings
        self.limits = conversation.settings.limits

    # -- shared helpers -----------------------------------------------------------------------

    def output_args(self) -> dict[str, int]:
        half = self.limits.half_lines
        return {"head": half, "tail": half, "max_chars": self.limits.max_chars}

    async def _images(
        self, client: GatewayClient, ref: str, blocks: list[Block]
    ) -> list[TextContent | ImageContent]:
        content: list[TextContent | ImageContent] = []
        shown = 0
        for block in blocks:
            if isinstance(block, str):
                content.append(text_block(block))
                continue
            if shown >= MAX_IMAGES:
                content.append(
                    text_block(
                        f"[image {block.index} of In [{block.execution}] "
                        f"not shown: at most {MAX_IMAGES} per result]"
                    )
                )
                continue
            bundle = await client.rich(ref, block.execution, block.index)
            data = bundle["data"].get(block.mime, "")
            if not isinstance(data, str) or len(data) > MAX_IMAGE_BYTES:
                content.append(
                    text_block(
                        f"[image {block.index} of In [{block.execution}] "
                        "not shown: larger than 4 MB]"
                    )
                )
                continue
            content.append(ImageContent(type="image", data=data.strip(), mime_type=block.mime))
            shown += 1
        return content

    async def _full_output(self, client: GatewayClient, ref: str, number: int) -> CellOutput:
        lines: list[dict[str, Any]] = []
        while True:
            first = len(lines) + 1
            response = await client.read(
                ref, number, "combined", f"{first}:{first + FULL_READ_LINES - 1}"
            )
            lines.extend(response["lines"])
            if not response["lines"] or len(lines) >= response["total"]:
                return CellOutput(lines, [], response["total"])

    # -- waiting on an execution --------------------------------------------------------------

    async def follow(
        self,
        ctx: Context,
        client: GatewayClient,
        ref: str,
        response: dict[str, Any],
        *,
        deadline: float,
        until_silent: float | None = None,
        full_output: bool = False,
        note: str = "",
    ) -> CallToolResult:
        """Wait on an execution until it ends, asks for input, goes silent, or time runs out."""
        execution, returned = response["execution"], response["returned"]
        number = execution["number"]
        started = time.monotonic()
        while True:
            if returned == "input":
                answered = await self._answer_input(ctx, client, ref, execution, deadline)
                if answered:
                    returned = "timeout"
                    continue
                break
            if returned in ("final", "silent") or execution["state"] in FINAL_STATES:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await self._progress(ctx, execution, time.monotonic() - started)
            response = await client.execution(
                ref,
                number,
                wait=min(SLICE_SECONDS, remaining),
                until_silent=until_silent,
                **self.output_args(),
            )
            execution, returned = response["execution"], response["returned"]
        return await self.cell_result(
            client, ref, execution, returned, full_output=full_output, note=note
        )

    async def _progress(self, ctx: Context, execution: dict[str, Any], waited: float) -> None:
        output = execution.get("output") or {}
        last = (output.get("tail") or output.get("head") or [{}])[-1].get("text", "")
        message = f"In [{execution['number']}] running {waited:.0f} s" + (
            f": {last[:200]}" if last else ""
        )
        try:
            await ctx.report_progress(waited, None, message)
        except Exception as e:  # a host that dropped the progress token must not fail the call
            log.debug("progress not delivered: %s", e)

    async def cell_result(
        self,
        client: GatewayClient,
        ref: str,
        execution: dict[str, Any],
        returned: str,
        *,
        full_output: bool,
        note: str,
    ) -> CallToolResult:
        number = execution["number"]
        output = CellOutput.from_gateway(execution.get("output"))
        if execution["state"] in FINAL_STATES:
            if full_output:
                output = await self._full_output(client, ref, number)
                blocks = render_cell(execution, output, limits_for_full(output))
            else:
                blocks = render_cell(execution, output, self.limits)
        else:
            blocks = [render_running(execution, [*output.head, *output.tail][-10:])]
        if note:
            blocks.insert(0, note)
        content = await self._images(client, ref, blocks)
        shown = sum(1 for b in blocks if isinstance(b, Image))
        request = execution.get("input")
        error = execution.get("error")
        model = CellResult(
            kernel=execution["kernel_id"],
            execution=number,
            state=execution["state"],
            elapsed_seconds=round(execution["elapsed"], 3),
            returned=returned,  # type: ignore[arg-type]
            error=f"{error['name']}: {error['value']}" if error else None,
            output_lines=output.total,
            omitted_lines=max(0, output.total - len(output.head) - len(output.tail))
            if not full_output
            else 0,
            input_prompt=request["prompt"] if request else None,
            images=shown,
        )
        return tool_result(content, model, structured=self.settings.result_mode == "structured")

    async def _answer_input(
        self,
        ctx: Context,
        client: GatewayClient,
        ref: str,
        execution: dict[str, Any],
        deadline: float,
    ) -> bool:
        """Ask the host's input dialog for the pending input(); return whether it was answered."""
        request = execution["input"] or {}
        if request.get("password") or not can_elicit(ctx):
            return False
        number = execution["number"]
        message = f"In [{number}] asks for input: {request.get('prompt', '')}"
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            state = {"kernel": ref, "execution": number, "deadline_in": deadline - time.monotonic()}
            raise NeedsInput(
                InputRequiredResult(
                    input_requests={
                        "input": ElicitRequest(
                            params=ElicitRequestFormParams(
                                message=message,
                                requested_schema=render_elicitation_schema(InputValue),
                            )
                        )
                    },
                    request_state=json.dumps(state),
                )
            )
        try:
            answer = await ctx.elicit(message=message, schema=InputValue)
        except MCPError as e:
            log.info("input dialog unavailable: %s", e)
            return False
        if not isinstance(answer, AcceptedElicitation):
            return False
        await client.send_input(ref, number, answer.data.value)
        return True

    async def resume(self, ctx: Context) -> CallToolResult:
        """Continue a call that returned an input-required result, with the host's answer."""
        state = json.loads(ctx.request_state or "{}")
        client = await self.conversation.gateway()
        ref, number = state["kernel"], state["execution"]
        answer = (ctx.input_responses or {}).get("input")
        note = ""
        if answer is not None and getattr(answer, "action", None) == "accept":
            value = InputValue.model_validate(answer.content).value  # type: ignore[union-attr]
            await client.send_input(ref, number, value)
        else:
            note = (
                f"The input dialog was dismissed; In [{number}] still waits for input. "
                f'Answer with send_input(value="…", execution={number}) or interrupt().'
            )
        deadline = time.monotonic() + max(0.0, float(state.get("deadline_in", INPUT_WAIT)))
        response = await client.execution(ref, number, wait=0.2, **self.output_args())
        if note:
            return await self.cell_result(
                client,
                ref,
                response["execution"],
                response["returned"],
                full_output=False,
                note=note,
            )
        return await self.follow(ctx, client, ref, response, deadline=deadline)


def limits_for_full(output: CellOutput) -> Any:
    """Return limits that keep every line of `output` (full_output=true)."""
    from loomgate.translator.presentation import OutputLimits

    return OutputLimits(max_lines=max(2, 2 * output.total), max_chars=1 << 62)


def can_elicit(ctx: Context) -> bool:
    """Return whether the host declared a form input dialog (elicitation)."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)
