"""Following an execution: one long poll with progress beside it, input dialogs, and the cell's
result."""

from __future__ import annotations

import time
from contextvars import ContextVar

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, ImageContent, TextContent

from loomgate.shared import wire
from loomgate.shared.wire import FINAL_STATES
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.mcp_server.conversation import Conversation
from loomgate.translator.mcp_server.input_dialogs import DialogState, ask_host, host_answer
from loomgate.translator.mcp_server.results import CellResult, text_block, tool_result
from loomgate.translator.mcp_server.wait_progress import WaitProgress
from loomgate.translator.output_view import Block, CellOutput, Image, chars_of, lines_within
from loomgate.translator.presentation import (
    RUNNING_TAIL,
    dismissed_dialog_note,
    image_over_count,
    image_over_size,
    render_cell,
    render_running,
)

INPUT_WAIT = 10.0  # how long a tool waits on after an input answer
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 4 << 20
FULL_READ_LINES = 10_000
# The executions a call's cell results were made of, collected for whoever put a list here
# before the call (the MCP Apps extension names the last one's kernel and number, even in content
# mode, where the result itself names neither).
RESULT_EXECUTIONS: ContextVar[list[wire.Execution] | None] = ContextVar(
    "result_executions", default=None
)


class CellFollower:
    """Follows one conversation's executions: waits, input dialogs, and the cell results."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.settings = conversation.settings
        self.limits = conversation.settings.limits

    def output_args(self) -> dict[str, int]:
        """Return the head/tail/max_chars a status request asks for, from the output limits."""
        half = self.limits.half_lines
        return {"head": half, "tail": half, "max_chars": self.limits.max_chars}

    def progress(self, ctx: Context, client: GatewayClient, ref: str) -> WaitProgress:
        """Return the progress of a tool call's waits on kernel `ref` (from its hold's events
        when this conversation holds it)."""
        return WaitProgress(ctx, client, ref, self.conversation.activity(ref))

    async def long_poll(
        self,
        progress: WaitProgress,
        selector: str | int,
        *,
        wait: float,
        until_silent: float | None = None,
    ) -> wire.ExecutionReply:
        """Return the execution once it ends, asks for input, goes silent or `wait` runs out:
        one request, with a progress notification each second beside it."""
        number = selector if isinstance(selector, int) else None
        async with progress.beside(number):
            return await progress.client.execution(
                progress.ref, selector, wait=wait, until_silent=until_silent, **self.output_args()
            )

    async def follow(
        self,
        ctx: Context,
        progress: WaitProgress,
        response: wire.ExecutionReply,
        *,
        deadline: float,
        until_silent: float | None = None,
        full_output: bool = False,
        note: str = "",
    ) -> CallToolResult:
        """Return the cell of `response` once it ends, asks for input, goes silent, or time
        runs out (a cell still running is waited on again only after an input answer)."""
        client, ref = progress.client, progress.ref
        execution, returned = response["execution"], response["returned"]
        while True:
            if returned == "input":
                if await ask_host(ctx, client, ref, execution, deadline):
                    returned = "timeout"
                    continue
                break
            if returned in ("final", "silent") or execution["state"] in FINAL_STATES:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            response = await self.long_poll(
                progress, execution["number"], wait=remaining, until_silent=until_silent
            )
            execution, returned = response["execution"], response["returned"]
        return await self.cell_result(
            client, ref, execution, returned, full_output=full_output, note=note
        )

    async def resume(self, ctx: Context) -> CallToolResult:
        """Return the cell after the host answered (or dismissed) an input-required result."""
        state = DialogState.loads(ctx.request_state or "", INPUT_WAIT)
        client = await self.conversation.gateway()
        value = host_answer(ctx)
        if value is not None:
            await client.send_input(state.ref, state.number, value)
        deadline = time.monotonic() + state.deadline_in
        if value is None:
            response = await client.execution(
                state.ref, state.number, wait=0.2, **self.output_args()
            )
            return await self.cell_result(
                client,
                state.ref,
                response["execution"],
                response["returned"],
                full_output=False,
                note=dismissed_dialog_note(state.number),
            )
        async with self.progress(ctx, client, state.ref) as progress:
            response = await self.long_poll(progress, state.number, wait=state.deadline_in)
            return await self.follow(ctx, progress, response, deadline=deadline)

    async def cell_result(
        self,
        client: GatewayClient,
        ref: str,
        execution: wire.Execution,
        returned: wire.Returned,
        *,
        full_output: bool,
        note: str,
    ) -> CallToolResult:
        """Return the tool result of one execution: its text, images and structured summary."""
        collected = RESULT_EXECUTIONS.get()
        if collected is not None:
            collected.append(execution)
        number = execution["number"]
        output = CellOutput.from_gateway(execution.get("output"))
        language = await self.conversation.language_shown(client, ref, execution["kernel_id"])
        if execution["state"] in FINAL_STATES:
            sandbox = await self.sandbox_of(client, ref, execution)
            if full_output:
                output = await self._from_the_start(client, ref, number)
                limits = output.limits_to_keep_all()
            else:
                limits = self.limits
            blocks = render_cell(execution, output, limits, sandbox=sandbox, language=language)
        else:
            last = [*output.head, *output.tail][-RUNNING_TAIL:]
            blocks = [render_running(execution, last, language=language)]
        if note:
            blocks.insert(0, note)
        content = await self._images(client, ref, blocks)
        model = CellResult.of(
            execution,
            returned,
            output_lines=output.total,
            omitted_lines=output.omitted,
            images=sum(1 for block in blocks if isinstance(block, Image)),
        )
        return tool_result(content, model, structured=self.settings.structured)

    async def sandbox_of(
        self, client: GatewayClient, ref: str, execution: wire.Execution
    ) -> wire.Sandbox | None:
        """Return the sandbox of the kernel that ran `execution`, when the cell failed on one of
        its rules (its line names the limit or the writable places); else None, unasked."""
        if execution.get("sandbox_failure") is None:
            return None
        bound = self.conversation.kernel
        if bound is not None and bound["id"] == execution["kernel_id"]:
            return bound.get("sandbox")  # fixed for the kernel's life
        return (await client.get_kernel(ref)).get("sandbox")

    async def _images(
        self, client: GatewayClient, ref: str, blocks: list[Block]
    ) -> list[TextContent | ImageContent]:
        """Return the blocks as content, each image fetched (at most MAX_IMAGES of them); an
        image whose bytes an earlier one of this result has (a figure displayed, then returned
        as the cell's value) is sent once."""
        content: list[TextContent | ImageContent] = []
        shown = 0
        sent: set[str] = set()
        for block in blocks:
            if isinstance(block, str):
                content.append(text_block(block))
                continue
            if shown >= MAX_IMAGES:
                content.append(text_block(image_over_count(block, MAX_IMAGES)))
                continue
            bundle = await client.rich(ref, block.execution, block.index)
            data = bundle["data"].get(block.mime, "")
            if not isinstance(data, str) or len(data) > MAX_IMAGE_BYTES:
                content.append(text_block(image_over_size(block, MAX_IMAGE_BYTES)))
                continue
            data = data.strip()
            if data in sent:
                continue
            sent.add(data)
            content.append(ImageContent(type="image", data=data, mime_type=block.mime))
            shown += 1
        return content

    async def _from_the_start(self, client: GatewayClient, ref: str, number: int) -> CellOutput:
        """Return a finished execution's combined lines from the first, as many as the reply's
        budget holds (cut at a line; the omission line then names the read_output call for
        the rest), read a page at a time."""
        budget = self.limits.max_chars
        lines: list[wire.Line] = []
        while True:
            first = len(lines) + 1
            response = await client.read(
                ref, number, "combined", f"{first}:{first + FULL_READ_LINES - 1}", budget
            )
            least = 0 if lines else 1
            kept = lines_within(response["lines"], budget - chars_of(lines), least)
            lines.extend(kept)
            full = len(kept) < len(response["lines"])
            if full or not response["lines"] or len(lines) >= response["total"]:
                return CellOutput(lines, [], response["total"])
