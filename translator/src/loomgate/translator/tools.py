"""The eleven tools' behaviour: each maps a model's request onto gateway calls and text."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.server.mcpserver import Context
from mcp.types import (
    CallToolResult,
    ImageContent,
    TextContent,
)
from pydantic import BaseModel

from loomgate.translator.cell_follower import (
    SLICE_SECONDS,
    CellFollower,
    NeedsInput,
    text_block,
)
from loomgate.translator.gateway_client import GatewayError
from loomgate.translator.gateway_selection import GatewayConfigError
from loomgate.translator.presentation import (
    render_execution_status,
    render_kernel,
    render_kernels,
    render_read,
    render_search,
)
from loomgate.translator.results import (
    KernelAction,
    KernelInfo,
    KernelsResult,
    NumberedLine,
    ReadResult,
    SearchHit,
    SearchResult,
    StatusResult,
    tool_result,
)
from loomgate.translator.session import Conversation

log = logging.getLogger("loomgate.translator")

INTERRUPT_WAIT = 10.0
INPUT_WAIT = 10.0


class ToolFailure(Exception):
    """A tool failure to report to the model as one sentence (isError)."""


class Tools:
    """The tool implementations for one conversation."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.settings = conversation.settings
        self.follower = CellFollower(conversation)

    async def resume(self, ctx: Context) -> CallToolResult:
        """Continue a call that returned an input-required result, with the host's answer."""
        return await self.follower.resume(ctx)

    # -- tools --------------------------------------------------------------------------------

    async def run_cell(
        self, ctx: Context, code: str, wait_seconds: float, full_output: bool, kernel: str | None
    ) -> CallToolResult:
        """Submit `code` and wait up to `wait_seconds`; the cell never stops when the wait ends."""
        client, ref = await self.conversation.kernel_ref(kernel)
        startup = self.conversation.take_startup_output()
        note = f"startup.py output:\n{startup}" if startup else ""
        deadline = time.monotonic() + wait_seconds
        try:
            response = await client.submit(
                ref, code, wait=min(SLICE_SECONDS, wait_seconds), **self.follower.output_args()
            )
        except GatewayError as e:
            if e.code == "busy":
                running = e.details.get("running")
                if running is None:
                    raise ToolFailure(
                        "The kernel is busy starting another cell; the cell was not run. "
                        "Try again in a moment."
                    ) from None
                raise ToolFailure(
                    f"The kernel is busy running In [{running}]; the cell was not run. "
                    f"Use wait(execution={running}) to wait for it or interrupt() to stop it."
                ) from None
            gone = e.details.get("kernel_id")
            if e.code == "unavailable" and gone and kernel is None:
                await self.conversation.forget_kernel(gone)
                raise ToolFailure(
                    f"This conversation's kernel {gone[:8]} is no longer running (the gateway "
                    "restarted, or the kernel was stopped), so its variables are gone; the cell "
                    f"was not run. Its records stay readable with kernel={gone[:8]!r}. Run the "
                    "cell again to start a new kernel, or connect() to another."
                ) from None
            raise
        return await self.follower.follow(
            ctx, client, ref, response, deadline=deadline, full_output=full_output, note=note
        )

    async def wait(
        self,
        ctx: Context,
        execution: int | None,
        timeout_seconds: float,
        until_silent_seconds: float | None,
        kernel: str | None,
    ) -> CallToolResult:
        """Wait more for an execution, without interrupting it."""
        client, ref = await self.conversation.kernel_ref(kernel)
        deadline = time.monotonic() + timeout_seconds
        response = await client.execution(
            ref,
            execution or "current",
            wait=min(SLICE_SECONDS, timeout_seconds),
            until_silent=until_silent_seconds,
            **self.follower.output_args(),
        )
        return await self.follower.follow(
            ctx, client, ref, response, deadline=deadline, until_silent=until_silent_seconds
        )

    async def read_output(
        self,
        execution: int | None,
        stream: str,
        lines: str | None,
        max_chars: int | None,
        kernel: str | None,
    ) -> CallToolResult:
        """Read a line range of one stream."""
        client, ref = await self.conversation.kernel_ref(kernel)
        response = await client.read(ref, execution or "current", stream, lines, max_chars)
        model = ReadResult(
            kernel=ref,
            execution=response["number"],
            stream=stream,
            total=response["total"],
            lines=[
                NumberedLine(n=x["n"], text=x["text"], clipped=x.get("clipped", 0))
                for x in response["lines"]
            ],
        )
        return self.result([text_block(render_read(response))], model)

    async def search_output(
        self,
        query: str,
        execution: int | Literal["all"] | None,
        stream: str,
        mode: str,
        context: int,
        ignore_case: bool,
        max_matches: int,
        kernel: str | None,
    ) -> CallToolResult:
        """Find lines in one execution's stream, or in all of them."""
        client, ref = await self.conversation.kernel_ref(kernel)
        selector = "current" if execution is None else str(execution)
        response = await client.search(
            ref,
            query,
            execution=selector,
            stream=stream,
            mode=mode,
            context=context,
            ignore_case=ignore_case,
            max_matches=max_matches,
        )
        scope = (
            "all executions"
            if selector == "all"
            else (
                f"In [{response['groups'][0]['execution']}]"
                if response["groups"]
                else f"execution {selector}"
            )
        )
        hits = [
            SearchHit(execution=g["execution"], n=x["n"], text=x["text"], marker=x["marker"])
            for g in response["groups"]
            for x in g["lines"]
        ]
        model = SearchResult(
            kernel=ref,
            query=query,
            mode=response["mode"],
            matches=response["matches"],
            truncated=response["truncated"],
            hits=hits,
        )
        return self.result([text_block(render_search(response, scope))], model)

    async def interrupt(self, ctx: Context, kernel: str | None) -> CallToolResult:
        """Interrupt the running execution and show how it ended."""
        client, ref = await self.conversation.kernel_ref(kernel)
        try:
            response = await client.interrupt(ref)
        except GatewayError as e:
            if e.code == "conflict":
                raise ToolFailure("Nothing is running on this kernel to interrupt.") from None
            raise
        number = response["execution"]["number"]
        waited = await client.execution(
            ref, number, wait=INTERRUPT_WAIT, **self.follower.output_args()
        )
        return await self.follower.cell_result(
            client, ref, waited["execution"], waited["returned"], full_output=False, note=""
        )

    async def reset(self, kernel: str | None) -> CallToolResult:
        """Restart the kernel: variables cleared; records and numbering kept; startup re-run."""
        client, ref = await self.conversation.kernel_ref(kernel)
        response = await client.reset(ref)
        kernel_model = response["kernel"]
        killed = response.get("killed")
        startup = await self.conversation.setup.run(client, kernel_model["id"])
        lines = [
            f"Kernel {kernel_label(kernel_model)} was reset: its variables are gone; "
            "records and numbering are kept."
        ]
        if killed:
            lines.append(f"In [{killed['number']}] was running and was killed.")
        if startup and not self.settings.quiet:
            lines.append(f"startup.py output:\n{startup}")
        model = KernelAction(
            action="reset",
            kernel=KernelInfo.of(kernel_model, client.label),
            killed_execution=killed["number"] if killed else None,
        )
        return self.result([text_block("\n".join(lines))], model)

    async def send_input(
        self, ctx: Context, value: str, execution: int | None, kernel: str | None
    ) -> CallToolResult:
        """Answer a pending input() and wait a little for what follows."""
        client, ref = await self.conversation.kernel_ref(kernel)
        try:
            sent = await client.send_input(ref, execution or "current", value)
        except GatewayError as e:
            if e.code == "conflict":
                raise ToolFailure(
                    f"In [{execution or 'current'}] is not waiting for input "
                    f"(it is {e.details.get('state', 'not running')})."
                ) from None
            raise
        number = sent["execution"]["number"]
        response = await client.execution(
            ref, number, wait=min(SLICE_SECONDS, INPUT_WAIT), **self.follower.output_args()
        )
        return await self.follower.follow(
            ctx, client, ref, response, deadline=time.monotonic() + INPUT_WAIT
        )

    async def status(self, execution: int | None, kernel: str | None) -> CallToolResult:
        """Return a kernel's summary, or one execution's lifecycle and stream sizes."""
        client, ref = await self.conversation.kernel_ref(kernel)
        kernel_model = (await client.get_kernel(ref))["kernel"]
        info = KernelInfo.of(kernel_model, client.label)
        if execution is None:
            text = render_kernel(kernel_model, gateway=client.label)
            if kernel_model.get("last_execution"):
                latest = (await client.execution(ref, "current"))["execution"]
                text += "\n\n" + render_execution_status(latest)
            return self.result([text_block(text)], StatusResult(kernel=info))
        record = (await client.execution(ref, execution))["execution"]
        model = StatusResult(
            kernel=info,
            execution=record["number"],
            state=record["state"],
            elapsed_seconds=round(record["elapsed"], 3),
            streams={name: size["lines"] for name, size in record["streams"].items()},
        )
        return self.result([text_block(render_execution_status(record))], model)

    async def connect(
        self, kernel: str, gateway: str | None, kernel_spec: str | None
    ) -> CallToolResult:
        """Attach to (or create) a named persistent kernel."""
        model, created, startup = await self.conversation.connect(kernel, gateway, kernel_spec)
        client = await self.conversation.gateway()
        verb = "Created" if created else "Connected to"
        lines = [
            f"{verb} kernel {kernel_label(model)} on {client.label} "
            f"({model['executions']} executions so far)."
        ]
        if startup:
            lines.append(f"startup.py output:\n{startup}")
        info = KernelInfo.of(model, client.label)
        return self.result(
            [text_block("\n".join(lines))],
            KernelAction(action="connect", kernel=info, created=created),
        )

    async def list_kernels(self, gateway: str | None) -> CallToolResult:
        """List a gateway's kernels, marking this conversation's."""
        client = await self.conversation.gateway(gateway)
        kernels = (await client.list_kernels())["kernels"]
        current = self.conversation.kernel["id"] if self.conversation.kernel else None
        model = KernelsResult(
            gateway=client.label,
            current=current,
            kernels=[KernelInfo.of(k, client.label) for k in kernels],
        )
        return self.result([text_block(render_kernels(kernels, current, client.label))], model)

    async def stop_kernel(self, kernel: str) -> CallToolResult:
        """Stop a kernel; its records stay readable."""
        client = await self.conversation.gateway()
        stopped = (await client.stop_kernel(kernel))["kernel"]
        await self.conversation.forget_kernel(stopped["id"])
        text = f"Stopped kernel {kernel_label(stopped)}; its records stay readable."
        info = KernelInfo.of(stopped, client.label)
        return self.result([text_block(text)], KernelAction(action="stop", kernel=info))

    def result(self, content: list[TextContent | ImageContent], model: BaseModel) -> CallToolResult:
        """Return a tool result: content, plus structuredContent in structured mode."""
        return tool_result(content, model, structured=self.settings.result_mode == "structured")


def kernel_label(kernel: dict[str, Any]) -> str:
    """Return a kernel's name, or its short id."""
    return str(kernel.get("name") or kernel["id"][:8])


def failure(message: str) -> CallToolResult:
    """Return a tool error: isError with one sentence."""
    return CallToolResult(content=[text_block(message)], is_error=True)


async def guarded(call: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
    """Run a tool body, turning every failure into one clear sentence (never a traceback)."""
    try:
        return await call()
    except (ToolFailure, GatewayError, GatewayConfigError) as e:
        return failure(str(e))
    except (asyncio.CancelledError, NeedsInput):
        raise
    except Exception as e:
        log.exception("tool failed")
        return failure(f"loomgate-mcp failed unexpectedly ({type(e).__name__}: {e}).")
