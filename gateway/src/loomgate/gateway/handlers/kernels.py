"""Endpoints for kernels and the gateway: info, list, create-or-get, get, stop, interrupt,
reset, setup, shutdown. Each is a function of the call, answering (status, body) or raising a
Refusal."""

from __future__ import annotations

import asyncio
import contextlib
import os

from tornado import web

from loomgate.gateway.errors import BadRequest, Forbidden, NotFound, Refusal
from loomgate.gateway.handlers.answers import Answer
from loomgate.gateway.handlers.call import Call
from loomgate.gateway.kernels import checkpoints, forks
from loomgate.gateway.kernels.notebooks import note_paths
from loomgate.gateway.kernels.open_to_agents import ONLY_THE_PERSON_OPENS
from loomgate.gateway.sandbox import probe
from loomgate.gateway.upstream import attach as upstream_attach
from loomgate.shared import wire
from loomgate.shared.echo import echo

PROTOCOL_VERSION = 1
CAPABILITIES = [
    "records",
    "streams",
    "search",
    "input",
    "events",
    "hold",
    "reset",
    "interrupt",
    "rich",
    "long_poll",
    "setup",
    "notebook",
]


async def note_sessions(call: Call) -> None:
    """Bring each live kernel's notebook and console paths up to date from the server's
    sessions (what JupyterLab opened), for kernel models and references by path."""
    sessions = await call.settings["session_manager"].list_sessions()
    paths: dict[str, list[str]] = {}
    for session in sessions:
        kernel = session.get("kernel") or {}
        if kernel.get("id") and session.get("path"):
            paths.setdefault(kernel["id"], []).append(str(session["path"]))
    note_paths(call.registry.stores, call.registry.live, paths)


async def info(call: Call) -> Answer:
    """GET info: who this is (service name, versions, capabilities, kernel specs), so a
    translator can tell it from a stock server."""
    from loomgate.gateway import __version__

    registry = call.registry
    upstream_error: str | None = None
    try:
        specs = await registry.kernel_specs()
    except Refusal as e:  # an upstream that does not answer (or refuses)
        specs, upstream_error = [], e.message
    # Found once per gateway (its first call runs bwrap's trials: off the event loop).
    mechanism = None if registry.mkm.upstream else await asyncio.to_thread(probe)
    return 200, wire.Info(
        service="loomgate",
        version=__version__,
        mode=call.settings["loomgate_mode"],
        protocol=PROTOCOL_VERSION,
        capabilities=[
            *CAPABILITIES,
            # The agent's cells appear in the notebooks open on their kernels (live_cells.py).
            *(["live_cells"] if call.settings.get("loomgate_live_cells") else []),
        ],
        pid=os.getpid(),
        started=call.settings["loomgate_started"],
        kernel_specs=specs,
        default_kernel_spec=registry.mkm.default_kernel_name,
        conversation_grace_seconds=registry.holders.grace_seconds,
        prewarm=registry.pool.size,
        prewarmed=registry.pool.report(),
        upstream=registry.mkm.upstream,
        upstream_error=upstream_error,
        sandbox_default=None if registry.mkm.upstream else registry.sandboxes.default_name(),
        sandbox_profiles=[] if registry.mkm.upstream else registry.sandboxes.names(),
        sandbox_mechanism=(mechanism.describe() or None) if mechanism is not None else None,
        sandbox_lacks=mechanism.lacks() if mechanism is not None else [],
        sandbox_refused=mechanism.reasons() if mechanism is not None else [],
    )


async def list_kernels(call: Call) -> Answer:
    """GET kernels: live kernels (and, with all=true, gone kernels whose records remain)."""
    await note_sessions(call)
    registry = call.registry
    kernels = [k.model() for k in registry.live.values()]
    if call.bool_arg("all", False):
        live = registry.live
        kernels += [s.model() for s in registry.stores.values() if s.kernel_id not in live]
    return 200, wire.KernelList(kernels=kernels, unattached=await unattached(call))


async def unattached(call: Call) -> list[wire.UpstreamKernel]:
    """Return the upstream's kernels this gateway does not record (none when it is not in
    upstream mode, or the upstream does not list them now)."""
    registry = call.registry
    if not registry.mkm.upstream:
        return []
    try:
        models = await registry.mkm.list_upstream()
    except web.HTTPError:  # refused (Kernel Gateway lists none by default) or unreachable
        return []
    return [
        wire.UpstreamKernel(
            id=str(model["id"]),
            kernel_spec=str(model.get("name", "")),
            state=str(model.get("execution_state", "unknown")),
            connections=int(model.get("connections", 0)),
        )
        for model in models
        if str(model["id"]) not in registry.live
    ]


CREATE_FIELDS = frozenset(
    {
        "name",
        "kernel_spec",
        "lifetime",
        "cwd",
        "env",
        "sandbox",
        "stricter_only",
        "open_to_agents",
        "fork",
    }
)


async def create_kernel(call: Call) -> Answer:
    """POST kernels {name, kernel_spec, lifetime, cwd, env, sandbox, stricter_only,
    open_to_agents, fork}: create a kernel, or return the live one with the requested name (201
    vs 200); with `fork`, a new kernel that is a copy of another's state. A model's call is
    `stricter_only` whatever it says, and never opens a kernel."""
    body = call.body
    opened = body.get("open_to_agents")
    if opened is not None and not isinstance(opened, bool):
        raise BadRequest("open_to_agents must be a bool")
    if call.agent and opened:
        raise Forbidden(ONLY_THE_PERSON_OPENS)
    name = body.get("name")
    env = body.get("env")
    for key, value, kind in (
        ("name", name, str),
        ("kernel_spec", body.get("kernel_spec"), str),
        ("cwd", body.get("cwd"), str),
        ("env", env, dict),
        ("sandbox", body.get("sandbox"), str),
        ("stricter_only", body.get("stricter_only"), bool),
        ("fork", body.get("fork"), str),
    ):
        if value is not None and not isinstance(value, kind):
            raise BadRequest(f"{key} must be a {kind.__name__}")
    if body.get("fork") is not None:
        if any(body.get(key) is not None for key in ("kernel_spec", "cwd", "env")):
            raise BadRequest("a fork takes its origin's kernel spec, cwd and environment")
        forked = await forks.start_fork(
            call.registry,
            body["fork"],
            name=name,
            lifetime=str(body.get("lifetime", "persistent")),
            sandbox=body.get("sandbox"),
            agent=call.agent,
        )
        return 201, wire.KernelCreated(kernel=forked.model(), created=True)
    kernel, created = await call.registry.create(
        name=name,
        kernel_spec=body.get("kernel_spec"),
        lifetime=str(body.get("lifetime", "persistent")),
        cwd=body.get("cwd"),
        env=env,
        sandbox=body.get("sandbox"),
        stricter_only=call.agent or bool(body.get("stricter_only", False)),
        open_to_agents=bool(opened),
    )
    return 201 if created else 200, wire.KernelCreated(kernel=kernel.model(), created=created)


async def get_kernel(call: Call) -> Answer:
    """GET kernels/{ref}: the kernel's model (live or gone; its checkpoints' memory measured
    now); `ref` may also name a notebook it serves, or (in upstream mode) a kernel of the
    upstream, which is attached now."""
    await note_sessions(call)
    registry = call.registry
    ref = call.path["ref"]
    try:
        store = registry.resolve_store(ref)
    except NotFound:
        attached = await upstream_attach.attach(registry, ref.strip())
        if attached is None:
            raise
        store = attached
    if store.kernel_id not in registry.live:  # on the upstream still? attach it again
        with contextlib.suppress(Refusal):  # unreachable: it is gone as far as known
            store = await upstream_attach.attach(registry, store.kernel_id) or store
    kernel = registry.live.get(store.kernel_id)
    if kernel is not None:
        await checkpoints.measure(kernel)  # its status tells the memory they hold now
    return 200, wire.KernelReply(kernel=kernel.model() if kernel else store.model())


async def open_to_agents(call: Call) -> Answer:
    """PUT kernels/{ref}/agents {"open": bool}: open the kernel to agents, or close it (only
    the person: a model's call is refused)."""
    if call.agent:
        raise Forbidden(ONLY_THE_PERSON_OPENS)
    opened = call.body.get("open")
    if not isinstance(opened, bool):
        raise BadRequest("open must be true or false")
    store = call.registry.resolve_store(call.path["ref"])
    store.note_open_to_agents(opened)
    kernel = call.registry.live.get(store.kernel_id)
    return 200, wire.KernelReply(kernel=kernel.model() if kernel else store.model())


async def stop_kernel(call: Call) -> Answer:
    """DELETE kernels/{ref}: stop the kernel; its records stay readable."""
    kernel = call.registry.resolve(call.path["ref"])
    await call.registry.stop(kernel)
    return 200, wire.KernelReply(kernel=kernel.store.model())


async def interrupt(call: Call) -> Answer:
    """POST kernels/{ref}/interrupt {"execution": N}: interrupt the running execution (only if
    it is N, when N is given); 409 when nothing runs, or another execution than N."""
    kernel = call.registry.resolve(call.path["ref"])
    expected = call.int_arg("execution", None, lo=1)
    if expected is not None:
        call.select(kernel.store, str(expected))  # an unknown number: 404, as elsewhere
    record = await kernel.executions.interrupt(expected)
    return 200, wire.ExecutionOnly(execution=record.summary())


async def reset(call: Call) -> Answer:
    """POST kernels/{ref}/reset: restart the kernel process; a running record becomes
    `killed`, numbering continues."""
    kernel = call.registry.resolve(call.path["ref"])
    running = kernel.executions.current
    await call.registry.reset(kernel)
    killed = running.summary() if running is not None else None
    return 200, wire.ResetReply(kernel=kernel.model(), killed=killed)


SETUP_PART_KEYS = frozenset({"name", "code", "runs_in", "required"})


async def setup(call: Call) -> Answer:
    """PUT kernels/{ref}/setup {"parts": [{name, code, runs_in?, required?}], "wait": s}:
    register the kernel's setup and run it now unless it already ran unchanged (Conflict when a
    required part cannot run in this kernel)."""
    parts = call.body.get("parts")
    if not isinstance(parts, list) or not all(setup_part(p) for p in parts):
        raise BadRequest(
            'parts must be a list of {"name": str, "code": str, "runs_in": str, '
            '"required": bool} objects (runs_in and required optional)'
        )
    wait = call.float_arg("wait", 60.0, lo=0, hi=3600)
    kernel = call.registry.resolve(call.path["ref"])
    ran = await kernel.register_setup(list(parts), wait)
    return 200, wire.SetupReply(setup=kernel.setup.model(), ran=ran)


def setup_part(part: object) -> bool:
    """Return whether `part` is a setup part as the wire writes one (nothing more)."""
    if not isinstance(part, dict) or not {"name", "code"} <= set(part) <= SETUP_PART_KEYS:
        return False
    texts = [part[key] for key in ("name", "code", "runs_in") if key in part]
    return all(isinstance(text, str) for text in texts) and isinstance(
        part.get("required", False), bool
    )


async def shutdown(call: Call) -> Answer:
    """POST shutdown {"kernels": "stop"|"keep"}: stop the gateway once this answer is sent;
    its kernels stop or keep running."""
    kernels = call.arg("kernels") or "stop"
    if kernels not in ("stop", "keep"):
        raise BadRequest(f"kernels must be 'stop' or 'keep', not {echo(kernels)}")
    call.registry.stop_kernels_on_exit = kernels == "stop"
    serverapp = call.settings["serverapp"]
    serverapp.io_loop.add_callback(serverapp.stop)  # runs after this answer is written
    return 202, {"stopping": True, "kernels": kernels}
