"""The structuredContent of each tool: typed models whose JSON schemas become output schemas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

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

    @classmethod
    def of(cls, kernel: wire.Kernel, gateway: str) -> KernelInfo:
        """Return the model of a gateway kernel object."""
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
        )


class CellResult(BaseModel):
    """An execution after run_cell, wait, send_input or interrupt."""

    kernel: str
    execution: int
    state: str
    elapsed_seconds: float
    returned: Literal["final", "input", "silent", "timeout"]
    error: str | None = None
    output_lines: int = 0
    omitted_lines: int = 0
    input_prompt: str | None = None
    images: int = 0


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


class SearchGroup(BaseModel):
    """Adjacent lines of one execution: the matches and their context."""

    execution: int
    first: int
    lines: list[str]
    matches: list[int]  # the numbers of the matching lines; the others are context


class SearchResult(BaseModel):
    """Lines found by search_output."""

    kernel: str
    query: str
    mode: str
    matches: int
    truncated: bool
    groups: list[SearchGroup]
    not_shown: int = 0  # matches left out to keep the reply within its budget


class StatusResult(BaseModel):
    """A kernel's summary, or one execution's lifecycle."""

    kernel: KernelInfo
    execution: int | None = None
    state: str | None = None
    elapsed_seconds: float | None = None
    streams: dict[str, int] | None = None


class ServerKernelsInfo(BaseModel):
    """Another gateway or Jupyter server of this machine and its kernels."""

    gateway: str
    url: str
    kernels: list[KernelInfo] | None  # None: it runs no loomgate extension, or did not answer
    note: str = ""


class UnattachedKernel(BaseModel):
    """A kernel on the gateway's upstream that it does not record yet (connect by id attaches)."""

    id: str
    kernel_spec: str
    state: str
    connections: int


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
