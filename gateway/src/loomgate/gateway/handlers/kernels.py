"""Endpoints for kernels: gateway info, list, create-or-get, get, stop, interrupt, reset,
setup."""

from __future__ import annotations

import contextlib
import os

from tornado import web

from loomgate.gateway.errors import BadRequest, NotFound, Refusal
from loomgate.gateway.handlers.base import LoomHandler, endpoint
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
]


class InfoHandler(LoomHandler):
    """GET /api/loomgate/info: who this is, so a translator can tell it from a stock server."""

    monitor_readable = True

    @endpoint
    async def get(self) -> None:
        """Return service name, versions, capabilities and kernel specs."""
        from loomgate.gateway import __version__

        upstream_error: str | None = None
        try:
            specs = await self.registry.kernel_specs()
        except Refusal as e:  # an upstream that does not answer (or refuses)
            specs, upstream_error = [], e.message
        self.reply(
            wire.Info(
                service="loomgate",
                version=__version__,
                mode=self.settings["loomgate_mode"],
                protocol=PROTOCOL_VERSION,
                capabilities=CAPABILITIES,
                pid=os.getpid(),
                started=self.settings["loomgate_started"],
                kernel_specs=specs,
                default_kernel_spec=self.registry.mkm.default_kernel_name,
                conversation_grace_seconds=self.registry.holders.grace_seconds,
                prewarm=self.registry.pool.size,
                prewarmed=self.registry.pool.report(),
                upstream=self.registry.mkm.upstream,
                upstream_error=upstream_error,
            )
        )


class KernelsHandler(LoomHandler):
    """GET/POST /api/loomgate/kernels: list kernels; create or get one by name."""

    monitor_readable = True

    @endpoint
    async def get(self) -> None:
        """Return live kernels (and, with all=true, gone kernels whose records remain)."""
        await self.note_sessions()
        kernels = [k.model() for k in self.registry.live.values()]
        if self.bool_arg("all", False):
            live = self.registry.live
            kernels += [s.model() for s in self.registry.stores.values() if s.kernel_id not in live]
        self.reply(wire.KernelList(kernels=kernels, unattached=await self.unattached()))

    async def unattached(self) -> list[wire.UpstreamKernel]:
        """Return the upstream's kernels this gateway does not record (none when it is not in
        upstream mode, or the upstream does not list them now)."""
        if not self.registry.mkm.upstream:
            return []
        try:
            models = await self.registry.mkm.list_upstream()
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
            if str(model["id"]) not in self.registry.live
        ]

    @endpoint
    async def post(self) -> None:
        """Create a kernel, or return the live one with the requested name (200 vs 201)."""
        body = self.body()
        name = body.get("name")
        env = body.get("env")
        for key, value, kind in (
            ("name", name, str),
            ("kernel_spec", body.get("kernel_spec"), str),
            ("cwd", body.get("cwd"), str),
            ("env", env, dict),
        ):
            if value is not None and not isinstance(value, kind):
                raise BadRequest(f"{key} must be a {kind.__name__}")
        kernel, created = await self.registry.create(
            name=name,
            kernel_spec=body.get("kernel_spec"),
            lifetime=str(body.get("lifetime", "persistent")),
            cwd=body.get("cwd"),
            env=env,
        )
        self.reply(
            wire.KernelCreated(kernel=kernel.model(), created=created), 201 if created else 200
        )


class KernelHandler(LoomHandler):
    """GET/DELETE /api/loomgate/kernels/{ref}: one kernel's model; stop it."""

    monitor_readable = True

    @endpoint
    async def get(self, ref: str) -> None:
        """Return the kernel's model (live or gone); `ref` may also name a notebook it serves,
        or (in upstream mode) a kernel of the upstream, which is attached now."""
        await self.note_sessions()
        try:
            store = self.registry.resolve_store(ref)
        except NotFound:
            attached = await upstream_attach.attach(self.registry, ref.strip())
            if attached is None:
                raise
            store = attached
        if store.kernel_id not in self.registry.live:  # on the upstream still? attach it again
            with contextlib.suppress(Refusal):  # unreachable: it is gone as far as known
                store = await upstream_attach.attach(self.registry, store.kernel_id) or store
        kernel = self.registry.live.get(store.kernel_id)
        self.reply(wire.KernelReply(kernel=kernel.model() if kernel else store.model()))

    @endpoint
    async def delete(self, ref: str) -> None:
        """Stop the kernel; its records stay readable."""
        kernel = self.registry.resolve(ref)
        await self.registry.stop(kernel)
        self.reply(wire.KernelReply(kernel=kernel.store.model()))


class InterruptHandler(LoomHandler):
    """POST /api/loomgate/kernels/{ref}/interrupt."""

    @endpoint
    async def post(self, ref: str) -> None:
        """Interrupt the running execution; 409 when nothing runs."""
        kernel = self.registry.resolve(ref)
        record = await kernel.executions.interrupt()
        self.reply(wire.ExecutionOnly(execution=record.summary()))


class ResetHandler(LoomHandler):
    """POST /api/loomgate/kernels/{ref}/reset."""

    @endpoint
    async def post(self, ref: str) -> None:
        """Restart the kernel process; a running record becomes `killed`, numbering continues."""
        kernel = self.registry.resolve(ref)
        running = kernel.executions.current
        await self.registry.reset(kernel)
        killed = running.summary() if running is not None else None
        self.reply(wire.ResetReply(kernel=kernel.model(), killed=killed))


class SetupHandler(LoomHandler):
    """PUT /api/loomgate/kernels/{ref}/setup {"parts": [{name, code}], "wait": s}."""

    @endpoint
    async def put(self, ref: str) -> None:
        """Register the kernel's setup and run it now unless it already ran unchanged."""
        body = self.body()
        parts = body.get("parts")
        if not isinstance(parts, list) or not all(
            isinstance(p, dict)
            and set(p) == {"name", "code"}
            and all(isinstance(v, str) for v in p.values())
            for p in parts
        ):
            raise BadRequest('parts must be a list of {"name": str, "code": str} objects')
        wait = self.number_arg("wait", 60.0, lo=0, hi=3600, body=body)
        kernel = self.registry.resolve(ref)
        setup = [wire.SetupPart(name=p["name"], code=p["code"]) for p in parts]
        ran = await kernel.register_setup(setup, wait)
        self.reply(wire.SetupReply(setup=kernel.setup.model(), ran=ran))


class ShutdownHandler(LoomHandler):
    """POST /api/loomgate/shutdown {"kernels": "stop"|"keep"}: stop the gateway."""

    @endpoint
    async def post(self) -> None:
        """Stop the gateway once this answer is sent; its kernels stop or keep running."""
        kernels = self.arg("kernels", self.body()) or "stop"
        if kernels not in ("stop", "keep"):
            raise BadRequest(f"kernels must be 'stop' or 'keep', not {echo(kernels)}")
        self.registry.stop_kernels_on_exit = kernels == "stop"
        serverapp = self.serverapp
        assert serverapp is not None
        self.reply({"stopping": True, "kernels": kernels}, 202)
        serverapp.io_loop.add_callback(serverapp.stop)
