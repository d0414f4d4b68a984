"""The MCP server: eleven tools mapped onto the gateway, and the shape of their results."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from mcp.server.elicitation import AcceptedElicitation, render_elicitation_schema
from mcp.server.mcpserver import Context, MCPServer
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

from loomgate.translator import __version__
from loomgate.translator.gateway_client import GatewayClient, GatewayError
from loomgate.translator.gateway_selection import GatewayConfigError
from loomgate.translator.presentation import (
    Block,
    CellOutput,
    Image,
    render_cell,
    render_execution_status,
    render_kernel,
    render_kernels,
    render_read,
    render_running,
    render_search,
)
from loomgate.translator.results import (
    CellResult,
    KernelAction,
    KernelInfo,
    KernelsResult,
    NumberedLine,
    ReadResult,
    SearchHit,
    SearchResult,
    StatusResult,
)
from loomgate.translator.session import Conversation, Settings

log = logging.getLogger("loomgate.translator")

SLICE_SECONDS = 1.0  # a long wait is cut into slices, each one reporting progress
INTERRUPT_WAIT = 10.0
INPUT_WAIT = 10.0
MAX_IMAGES = 8
MAX_IMAGE_BYTES = 4 << 20
FINAL = {"completed", "error", "interrupted", "killed", "died", "lost"}
FULL_READ_LINES = 10_000

INSTRUCTIONS = (
    "Persistent Jupyter (IPython) kernels. Variables survive between cells and between "
    "conversations. Each cell gets a number: In [N]. run_cell returns after wait_seconds even "
    "if the cell still runs; the cell keeps running, so continue with wait, read_output, "
    "search_output or interrupt. Long output is shortened to its head and tail; read_output "
    "reads any line range and search_output finds lines."
)

KernelArg = Annotated[
    str | None, Field(description="kernel name or id prefix (default: this conversation's)")
]
ExecutionArg = Annotated[
    int | None, Field(description="execution number N of In [N] (default: running, else latest)")
]


class InputValue(BaseModel):
    """What the input dialog asks the person for."""

    value: str = Field(description="the text to give to input()")


class ToolFailure(Exception):
    """A tool failure to report to the model as one sentence (isError)."""


class NeedsInput(Exception):
    """The cell waits for input and the host answers through an input-required result."""

    def __init__(self, result: InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


def text_block(text: str) -> TextContent:
    """Return a text content block."""
    return TextContent(type="text", text=text)


class Tools:
    """The tool implementations for one conversation."""

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.settings = conversation.settings
        self.limits = conversation.settings.limits

    # -- shared helpers -----------------------------------------------------------------------

    def _output_args(self) -> dict[str, int]:
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

    async def _follow(
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
            if returned in ("final", "silent") or execution["state"] in FINAL:
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
                **self._output_args(),
            )
            execution, returned = response["execution"], response["returned"]
        return await self._cell_result(
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

    async def _cell_result(
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
        if execution["state"] in FINAL:
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
        return self.result(content, model)

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
        response = await client.execution(ref, number, wait=0.2, **self._output_args())
        if note:
            return await self._cell_result(
                client,
                ref,
                response["execution"],
                response["returned"],
                full_output=False,
                note=note,
            )
        return await self._follow(ctx, client, ref, response, deadline=deadline)

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
                ref, code, wait=min(SLICE_SECONDS, wait_seconds), **self._output_args()
            )
        except GatewayError as e:
            if e.code == "busy":
                running = e.details.get("running")
                raise ToolFailure(
                    f"The kernel is busy running In [{running}]; the cell was not run. "
                    f"Use wait(execution={running}) to wait for it or interrupt() to stop it."
                ) from None
            raise
        return await self._follow(
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
            **self._output_args(),
        )
        return await self._follow(
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
        waited = await client.execution(ref, number, wait=INTERRUPT_WAIT, **self._output_args())
        return await self._cell_result(
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
            ref, number, wait=min(SLICE_SECONDS, INPUT_WAIT), **self._output_args()
        )
        return await self._follow(
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

    # -- results ------------------------------------------------------------------------------

    def result(self, content: list[TextContent | ImageContent], model: BaseModel) -> CallToolResult:
        """Return a tool result: content, plus structuredContent in structured mode."""
        if self.settings.result_mode == "content":
            return CallToolResult(content=content)
        return CallToolResult(content=content, structured_content=model.model_dump())


def limits_for_full(output: CellOutput) -> Any:
    """Return limits that keep every line of `output` (full_output=true)."""
    from loomgate.translator.presentation import OutputLimits

    return OutputLimits(max_lines=max(2, 2 * output.total), max_chars=1 << 62)


def kernel_label(kernel: dict[str, Any]) -> str:
    """Return a kernel's name, or its short id."""
    return str(kernel.get("name") or kernel["id"][:8])


def can_elicit(ctx: Context) -> bool:
    """Return whether the host declared a form input dialog (elicitation)."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


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


@asynccontextmanager
async def conversation_lifespan(
    settings: Settings,
) -> AsyncIterator[Tools]:
    """Yield the conversation's tools; on exit release its kernel hold (the grace starts)."""
    conversation = Conversation(settings)
    try:
        yield Tools(conversation)
    finally:
        await conversation.close()


def build_server(settings: Settings) -> MCPServer[Tools]:
    """Return the MCP server with all eleven tools registered for `settings`."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[Tools]) -> AsyncIterator[Tools]:
        async with conversation_lifespan(settings) as tools:
            yield tools

    server: MCPServer[Tools] = MCPServer(
        "loomgate", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan
    )
    from loomgate.translator.tool_registry import register_tools

    register_tools(server, settings.result_mode == "structured")
    return server
