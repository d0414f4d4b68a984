"""The structuredContent of each tool: typed models whose JSON schemas become output schemas.

Each model is built from the wire shapes it reports (`of`), so a change of the wire breaks the
type check here. Their published schemas are pinned by tests/translator/mcp_server/
test_output_schemas.py: a field keeps `str` where the wire has a Literal (a state, a mode),
because the schema has always left those open.
"""

from __future__ import annotations

from collections.abc import Sequence

from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent
from pydantic import BaseModel

from loomgate.shared import wire


class KernelInfo(BaseModel):
    """A kernel as a tool reports it."""

    id: str
    name: str | None
    state: str
    lifetime: str
    kernel_spec: str | None
    executions: int
    current_execution: int | None
    gateway: str
    paths: list[str] = []  # the notebooks and consoles that use it
    sandbox: str | None = None  # its sandbox profile; None: not sandboxed by loomgate

    @classmethod
    def of(cls, kernel: wire.Kernel, gateway: str) -> KernelInfo:
        """Return the model of a gateway kernel object."""
        sandbox = kernel.get("sandbox")  # absent from a gateway before sandboxes
        return cls(
            id=kernel["id"],
            name=kernel["name"],
            state=kernel["state"],
            lifetime=kernel["lifetime"],
            kernel_spec=kernel["kernel_spec"],
            executions=kernel["executions"],
            current_execution=kernel["current_execution"],
            gateway=gateway,
            paths=kernel["paths"],
            sandbox=sandbox["profile"] if sandbox is not None else None,
        )


class CellResult(BaseModel):
    """An execution after run_cell, wait, send_input or interrupt."""

    kernel: str
    execution: int
    state: str
    elapsed_seconds: float
    returned: wire.Returned
    error: str | None = None
    output_lines: int = 0
    omitted_lines: int = 0
    input_prompt: str | None = None
    images: int = 0
    sandbox_rule: str | None = None  # the sandbox rule the cell failed on (hidden, network, …)

    @classmethod
    def of(
        cls,
        execution: wire.Execution,
        returned: wire.Returned,
        *,
        output_lines: int,
        omitted_lines: int,
        images: int,
    ) -> CellResult:
        """Return the model of an execution as the gateway's long-poll returned it."""
        error, request = execution["error"], execution["input"]
        failure = execution.get("sandbox_failure")
        return cls(
            kernel=execution["kernel_id"],
            execution=execution["number"],
            state=execution["state"],
            elapsed_seconds=round(execution["elapsed"], 3),
            returned=returned,
            error=f"{error['name']}: {error['value']}" if error else None,
            output_lines=output_lines,
            omitted_lines=omitted_lines,
            input_prompt=request["prompt"] if request else None,
            images=images,
            sandbox_rule=failure["rule"] if failure is not None else None,
        )


class ReadResult(BaseModel):
    """A range of one stream: the texts of lines `first`, `first` + 1, … (as compact as the
    text reply: one string a line)."""

    kernel: str
    execution: int
    stream: str
    total: int
    first: int
    lines: list[str]
    clipped: dict[int, int] = {}  # line number → characters clipped off its end
    read_on: str | None = None  # the `lines` range that reads on, when not all was shown

    @classmethod
    def of(
        cls,
        kernel: str,
        stream: wire.StreamName,
        read: wire.StreamRead,
        shown: list[wire.Line],
        read_on: str | None,
    ) -> ReadResult:
        """Return the model of the `shown` lines of a stream read."""
        return cls(
            kernel=kernel,
            execution=read["number"],
            stream=stream,
            total=read["total"],
            first=shown[0]["n"] if shown else read["first"],
            lines=[line["text"] for line in shown],
            clipped={line["n"]: line["clipped"] for line in shown if line.get("clipped")},
            read_on=read_on,
        )


class SearchGroup(BaseModel):
    """Adjacent lines of one execution: the matches and their context."""

    execution: int
    first: int
    lines: list[str]
    matches: list[int]  # the numbers of the matching lines; the others are context

    @classmethod
    def of(cls, group: wire.SearchGroup) -> SearchGroup:
        """Return the model of a group of lines the gateway found."""
        lines = group["lines"]
        return cls(
            execution=group["execution"],
            first=lines[0]["n"],
            lines=[line["text"] for line in lines],
            matches=[line["n"] for line in lines if line["marker"] == "M"],
        )


class SearchResult(BaseModel):
    """Lines found by search_output."""

    kernel: str
    query: str
    mode: str
    matches: int
    truncated: bool
    groups: list[SearchGroup]
    not_shown: int = 0  # matches left out to keep the reply within its budget

    @classmethod
    def of(
        cls,
        kernel: str,
        query: str,
        reply: wire.SearchReply,
        shown: list[wire.SearchGroup],
        not_shown: int,
    ) -> SearchResult:
        """Return the model of a search reply, of which the groups `shown` fit the budget."""
        return cls(
            kernel=kernel,
            query=query,
            mode=reply["mode"],
            matches=reply["matches"],
            truncated=reply["truncated"],
            groups=[SearchGroup.of(group) for group in shown],
            not_shown=not_shown,
        )


class StatusResult(BaseModel):
    """A kernel's summary, or one execution's lifecycle."""

    kernel: KernelInfo
    execution: int | None = None
    state: str | None = None
    elapsed_seconds: float | None = None
    streams: dict[str, int] | None = None

    @classmethod
    def of(cls, kernel: KernelInfo, execution: wire.Execution) -> StatusResult:
        """Return the model of one execution's lifecycle on `kernel`."""
        return cls(
            kernel=kernel,
            execution=execution["number"],
            state=execution["state"],
            elapsed_seconds=round(execution["elapsed"], 3),
            streams={name: size["lines"] for name, size in execution["streams"].items()},
        )


class ServerKernelsInfo(BaseModel):
    """Another gateway or Jupyter server of this machine and its kernels."""

    gateway: str
    url: str
    kernels: list[KernelInfo] | None  # None: it runs no loomgate extension, or did not answer
    note: str = ""


class UnattachedKernel(BaseModel):
    """A kernel on the gateway's upstream that it does not record yet (connect by id attaches)."""

    # The fields of wire.UpstreamKernel, one for one (a test holds them equal).
    id: str
    kernel_spec: str
    state: str
    connections: int

    @classmethod
    def of(cls, kernel: wire.UpstreamKernel) -> UnattachedKernel:
        """Return the model of an upstream kernel."""
        return cls(
            id=kernel["id"],
            kernel_spec=kernel["kernel_spec"],
            state=kernel["state"],
            connections=kernel["connections"],
        )


class KernelsResult(BaseModel):
    """The kernels of a gateway, and of the person's Jupyter servers."""

    gateway: str
    current: str | None
    kernels: list[KernelInfo]
    elsewhere: list[ServerKernelsInfo] = []
    unattached: list[UnattachedKernel] = []


class KernelAction(BaseModel):
    """What connect, reset or stop_kernel did."""

    action: str
    kernel: KernelInfo
    created: bool = False
    killed_execution: int | None = None


def text_block(text: str) -> TextContent:
    """Return a text content block."""
    return TextContent(type="text", text=text)


def tool_result(
    content: Sequence[TextContent | ImageContent], model: BaseModel, *, structured: bool
) -> CallToolResult:
    """Return a tool result: content, plus `model` as structuredContent in structured mode."""
    blocks: list[ContentBlock] = list(content)
    if not structured:
        return CallToolResult(content=blocks)
    return CallToolResult(content=blocks, structured_content=model.model_dump())


def failure(message: str) -> CallToolResult:
    """Return a tool error: isError with one sentence."""
    return CallToolResult(content=[text_block(message)], is_error=True)
