"""The tools that choose and manage kernels: connect, list_kernels, stop_kernel and reset."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult
from pydantic import Field

from loomgate.translator.client.errors import Conflict, GatewayError
from loomgate.translator.mcp_server.results import (
    KernelAction,
    KernelInfo,
    KernelsResult,
    ServerKernelsInfo,
    UnattachedKernel,
    text_block,
    tool_result,
)
from loomgate.translator.mcp_server.tool_registry import KernelArg, conversation_of, tool
from loomgate.translator.presentation import (
    ENABLE_HINT,
    attached_note,
    connected_note,
    installed_note,
    live_cells_note,
    render_jupyter_server,
    render_kernels,
    render_setup,
    render_unattached,
    replaced_note,
    reset_note,
    shared_kernel_note,
    still_on_note,
    stop_needs_force,
    stopped_note,
)
from loomgate.translator.presentation.checkpoints import fork_lines
from loomgate.translator.presentation.kernels import back_to_own_note


@tool
async def reset(ctx: Context, kernel: KernelArg = None) -> Annotated[CallToolResult, KernelAction]:
    """Restart the kernel: variables are cleared; execution records and numbering are kept."""
    conversation = conversation_of(ctx)
    client, ref = await conversation.kernel_ref(kernel)
    response = await client.reset(ref)
    kernel_model, killed = response["kernel"], response["killed"]
    quiet = conversation.settings.quiet
    startup = render_setup(kernel_model["setup"]["results"], outputs=not quiet)  # ran again
    lines = [reset_note(kernel_model, killed)]
    if startup:
        lines.append(startup)
    model = KernelAction(
        action="reset",
        kernel=KernelInfo.of(kernel_model, client.label),
        killed_execution=killed["number"] if killed else None,
    )
    return tool_result(
        [text_block("\n".join(lines))], model, structured=conversation.settings.structured
    )


@tool
async def connect(
    kernel: Annotated[
        str,
        Field(
            min_length=1,
            description="kernel name, id prefix, or the notebook it serves (analysis.ipynb)",
        ),
    ],
    ctx: Context,
    gateway: Annotated[
        str | None,
        Field(description="a gateways.toml name, URL or jupyter:PORT (default: current)"),
    ] = None,
    kernel_spec: Annotated[str | None, Field(description="kernel spec for a new kernel")] = None,
    sandbox: Annotated[
        str | None,
        Field(
            min_length=1,
            description="sandbox profile for a new kernel (default: the person's); only one at "
            "least as strict as the default is allowed. Built in: none (not confined), "
            "workspace (writes only in its working directory), strict (workspace, no network)",
        ),
    ] = None,
    fork: Annotated[
        str | None,
        Field(min_length=1, description='a new kernel copying "K"\'s state, or "K@CHECKPOINT"'),
    ] = None,
) -> Annotated[CallToolResult, KernelAction]:
    """Attach to a persistent kernel by name (created if missing), or to the kernel of a
    notebook open in the person's Jupyter; later conversations can too."""
    conversation = conversation_of(ctx)
    try:
        model, created, startup = await conversation.attach(
            kernel, gateway, kernel_spec, sandbox, fork
        )
    except GatewayError as refused:  # nothing changed: say where cells still go
        said = refused.message.rstrip(".")
        refused.message = f"{said}; {still_on_note(conversation.kernel)}"
        raise
    client = await conversation.gateway()
    lines = [connected_note(model, client.label, created=created)]
    lines += fork_lines(model)
    if client.mode == "extension" and not created:
        lines.append(shared_kernel_note())
    notebooks = [path for path in model["paths"] if path.endswith(".ipynb")]
    if client.mode == "extension" and notebooks:
        lines.append(live_cells_note(notebooks, "live_cells" in client.capabilities))
    if attached_note(model):
        lines.append(attached_note(model))
    if conversation.replaced is not None:
        lines.append(replaced_note(conversation.replaced))
    if conversation.installed and not created:
        lines.append(installed_note(conversation.installed))
    if startup:
        lines.append(startup)
    action = KernelAction(
        action="connect", kernel=KernelInfo.of(model, client.label), created=created
    )
    return tool_result(
        [text_block("\n".join(lines))], action, structured=conversation.settings.structured
    )


@tool
async def list_kernels(
    ctx: Context,
    gateway: Annotated[str | None, Field(description="a gateways.toml name or URL")] = None,
    include_stopped: Annotated[
        bool, Field(description="also stopped kernels, whose records stay readable")
    ] = False,
) -> Annotated[CallToolResult, KernelsResult]:
    """List the gateway's kernels, and those of the person's Jupyter servers on this machine
    (with the notebook each serves); * marks the one this conversation uses."""
    conversation = conversation_of(ctx)
    client = await conversation.gateway(gateway)
    listing = await client.kernel_list(all=include_stopped)
    kernels = listing["kernels"]
    current = conversation.kernel["id"] if conversation.kernel else None
    sections = [render_kernels(kernels, current, client.label)]
    if listing["unattached"]:
        sections.append(render_unattached(listing["unattached"], client.label))
    elsewhere: list[ServerKernelsInfo] = []
    if gateway is None:
        for other in await conversation.elsewhere(client):
            sections.append(
                render_jupyter_server(
                    other.server.name,
                    other.server.url,
                    other.server.root_dir,
                    other.kernels,
                    current,
                    other.problem,
                )
            )
            listed = other.kernels
            elsewhere.append(
                ServerKernelsInfo(
                    gateway=other.server.name,
                    url=other.server.url,
                    kernels=None
                    if listed is None
                    else [KernelInfo.of(k, other.server.name) for k in listed],
                    note=other.problem or ("" if listed is not None else ENABLE_HINT),
                )
            )
    model = KernelsResult(
        gateway=client.label,
        current=current,
        kernels=[KernelInfo.of(k, client.label) for k in kernels],
        elsewhere=elsewhere,
        unattached=[UnattachedKernel.of(k) for k in listing["unattached"]],
    )
    content = [text_block("\n\n".join(sections))]
    return tool_result(content, model, structured=conversation.settings.structured)


@tool
async def stop_kernel(
    kernel: Annotated[str, Field(min_length=1, description="kernel name or id prefix")],
    ctx: Context,
    force: Annotated[
        bool, Field(description="also stop a kernel that serves a person's open notebook")
    ] = False,
) -> Annotated[CallToolResult, KernelAction]:
    """Stop a kernel and free its memory; its execution records stay readable. Stopping the
    kernel connect() moved to takes the conversation back to its own."""
    conversation = conversation_of(ctx)
    client, target = await conversation.locate(kernel)
    refusal = None if force else stop_needs_force(target, kernel)
    if refusal is not None:
        raise Conflict(refusal)
    stopped = await client.stop_kernel(target["id"])
    own = await conversation.forget_kernel(stopped["id"])
    text = stopped_note(stopped) if own is None else back_to_own_note(stopped, own)
    action = KernelAction(action="stop", kernel=KernelInfo.of(stopped, client.label))
    return tool_result([text_block(text)], action, structured=conversation.settings.structured)
