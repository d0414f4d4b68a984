"""One conversation's binding: its gateway, its kernel, and its hold on a conversation kernel.

Longer than 400 lines: binding, attaching, reviving and forgetting change the same fields (the
client, the kernel, the own kernel, the holds) together.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets

from loomgate.shared import wire
from loomgate.translator.client.connection import open_client
from loomgate.translator.client.errors import (
    Ambiguous,
    Conflict,
    Forbidden,
    GatewayError,
    NotFound,
    Unavailable,
    Uninspected,
    Unreachable,
)
from loomgate.translator.client.gateway import GatewayClient, runs_under
from loomgate.translator.client.hold import Hold
from loomgate.translator.client.jupyter_servers import (
    ServerKernels,
    find_in_servers,
    is_notebook_path,
    list_server_kernels,
    running_servers,
)
from loomgate.translator.client.kernel_activity import KernelActivity
from loomgate.translator.client.selection import select_gateway
from loomgate.translator.client.startup_files import StartupFiles, is_theirs
from loomgate.translator.client.target import GatewayTarget
from loomgate.translator.mcp_server.settings import Settings
from loomgate.translator.mcp_server.tool_reports import ToolReports
from loomgate.translator.presentation import (
    closed_to_agents_refusal,
    looser_sandbox_refusal,
    no_notebook_kernel,
    nothing_run_yet,
    render_setup,
    replaced_note,
    sandbox_mismatch,
    several_kernels,
    started_note,
    stopped_kernel_refusal,
    unconfined_refusal,
    uninspected_refusal,
)


class NothingRunYet(Exception):
    """A tool that needs the conversation's kernel was called before any cell ran."""


class Conversation:
    """The gateway and kernel one MCP conversation works with.

    The first execution tool with no kernel bound creates a `conversation` kernel (or attaches
    `--kernel`): the conversation's own, held for as long as the conversation lasts. `attach`
    (the connect tool) moves to another kernel only once that one is ready; when that one is
    stopped, the conversation goes back to its own.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # How the gateway (and the monitor) tells this conversation from others.
        self.label = f"conversation {secrets.token_hex(3)}"
        self.reports = ToolReports(self.label)
        self.setup = StartupFiles.from_config(environ=settings.env)
        self._clients: dict[str, GatewayClient] = {}
        # The language of each kernel the conversation worked with (by id): cells' headers
        # name it once there are several.
        self.languages: dict[str, str] = {}
        self.client: GatewayClient | None = None
        self.kernel: wire.Kernel | None = None
        # The kernel the conversation began on, and its gateway: the one it goes back to.
        self.own: tuple[GatewayClient, wire.Kernel] | None = None
        self._holds: dict[str, Hold] = {}  # by kernel id: the current and own conversation kernels
        self._binding: asyncio.Future[None] | None = None
        self._early: tuple[GatewayTarget, asyncio.Task[GatewayClient]] | None = None
        self.pending_startup = ""
        self.installed: list[str] = []  # the setup parts the last set_up ran
        self.replaced: wire.Kernel | None = None  # a stopped kernel whose name connect reused

    # -- gateways -----------------------------------------------------------------------------

    def start(self) -> None:
        """Start checking the gateway now, so that the first tool call need not wait for it.

        Only for a gateway given by --gateway or $LOOMGATE_URL, and only its check (GET info):
        the local default was started (if down) as the process began (`start_in_background`),
        and the first tool call finds it through its gateway.json.
        """
        try:
            target = select_gateway(self.settings.gateway, self.settings.env)
        except Exception:  # never stops the server: the first tool call selects again, reports it
            return
        if not target.local and not target.upstream:  # those are started on first use
            early = open_client(
                target, autostart=False, request_timeout=self.settings.request_timeout
            )
            self._early = (target, asyncio.ensure_future(early))

    async def gateway(self, option: str | None = None) -> GatewayClient:
        """Return a client for the gateway `option` names, else this conversation's gateway."""
        if option is None and self.client is not None:
            return self.client
        if option is not None:
            target = select_gateway(option, self.settings.env, named_by_model=True)
        else:
            target = select_gateway(self.settings.gateway, self.settings.env)
        client = await self.client_for(target)
        if option is None:
            self.client = client
        return client

    async def client_for(self, target: GatewayTarget) -> GatewayClient:
        """Return this conversation's client of `target`, opened on first use."""
        key = target_key(target)
        client = self._clients.get(key)
        if client is None:
            client = await self._open(target)
            client.client_label = self.label
            client.act_for_agent()
            self._clients[key] = client
        return client

    async def _open(self, target: GatewayTarget) -> GatewayClient:
        """Return a checked client of `target`: the early check's, unless that already failed."""
        if self._early is not None and self._early[0] == target:
            task = self._early[1]
            self._early = None
            # A check still under way is as fresh as a new one; one that failed may be stale.
            if not task.done() or (not task.cancelled() and task.exception() is None):
                return await task
        return await open_client(
            target,
            autostart=self.settings.autostart,
            request_timeout=self.settings.request_timeout,
        )

    async def revive(self, error: GatewayError) -> bool:
        """Start the local gateway again after it died under this conversation; return whether.

        Only for the local gateway with autostart, and only when the request was refused (it
        never reached a gateway, so the caller may send it again). The restarted gateway takes
        back the kernels, so the conversation goes on with the same kernel.
        """
        client = self.client
        refused = isinstance(error, Unreachable) and error.refused
        if client is None or not client.local or not self.settings.autostart or not refused:
            return False
        target = select_gateway(self.settings.gateway, self.settings.env)
        revived = await open_client(
            target, autostart=True, request_timeout=self.settings.request_timeout
        )
        revived.client_label = self.label
        revived.act_for_agent()
        if revived.url == client.url:
            await revived.aclose()  # the old client reaches it; its hold reconnects by itself
            return True
        self._clients[target_key(target)] = revived
        await client.aclose()
        self.client = revived
        # The holds through the old client are opened again through the revived one.
        stale = [self._holds.pop(k) for k, h in list(self._holds.items()) if h.client is client]
        if self.own is not None and self.own[0] is client:
            self.own = (revived, self.own[1])
            await self._hold(revived, self.own[1])
        if self.kernel is not None:
            await self._bind(revived, self.kernel)
        for hold in stale:
            await hold.aclose()
        return True

    # -- kernels ------------------------------------------------------------------------------

    async def kernel_ref(
        self, explicit: str | None, *, create: bool = False
    ) -> tuple[GatewayClient, str]:
        """Return the gateway and kernel reference an execution tool acts on.

        An explicit `kernel` argument wins; otherwise the bound kernel, attached (`--kernel`)
        on first use, or created (a conversation kernel) when `create` (run_cell): a tool that
        only looks never leaves a kernel behind.
        """
        client = await self.gateway()
        if explicit:
            return client, explicit
        if self.kernel is None and not create and not self.settings.kernel:
            raise NothingRunYet(nothing_run_yet())
        if self.kernel is None:
            # Shielded: a host cancelling the first call must not orphan the kernel it created.
            if self._binding is None or self._binding.done():
                self._binding = asyncio.ensure_future(self._bind_initial(client))
            try:
                await asyncio.shield(self._binding)
            finally:
                if self._binding.done() and self._binding.exception() is not None:
                    self._binding = None
        assert self.kernel is not None
        return client, self.kernel["id"]

    async def _bind_initial(self, client: GatewayClient) -> None:
        if self.settings.kernel:  # as connect does: attached, or started under that name
            kernel, created, startup = await self.attach(self.settings.kernel, None, None)
            notes = [replaced_note(self.replaced)] if self.replaced is not None else []
            if created and self.replaced is None:
                notes.append(started_note(self.settings.kernel))
            self.pending_startup = "\n".join([*notes, startup] if startup else notes)
            self.own = (client, kernel)
            return
        cwd = self.settings.cwd if client.on_this_host else None
        # No sandbox: the gateway's default, which the person chose.
        reply = await client.create_kernel(lifetime="conversation", cwd=cwd, stricter_only=True)
        kernel = reply["kernel"]
        startup = await self._set_up_or_stop(client, kernel, True)
        await self._bind(client, kernel)
        self.own = (client, kernel)
        self.pending_startup = startup

    async def set_up(self, client: GatewayClient, kernel_id: str, *, theirs: bool = False) -> str:
        """Give the kernel this user's startup.py and inspectors (they stay, and run again after
        every restart; only the inspectors in a kernel of someone else's Jupyter, `theirs`);
        return what running them now printed or how it failed ("" if they had already run
        there)."""
        setup = self.setup.inspectors_only() if theirs else self.setup
        reply = await setup.install(client, kernel_id)
        self.installed = reply["setup"]["parts"] if reply is not None and reply["ran"] else []
        if not self.installed or reply is None:
            return ""
        return render_setup(reply["setup"]["results"], outputs=not self.settings.quiet)

    def take_startup_output(self) -> str:
        """Return what the kernel's setup said and was not shown yet (once), or ""."""
        text, self.pending_startup = self.pending_startup, ""
        return text

    async def language_shown(self, client: GatewayClient, ref: str, kernel_id: str) -> str | None:
        """Return the language of kernel `kernel_id` (`ref`) for its cells' headers when this
        conversation has worked with kernels of several languages, else None (a kernel first
        met here is looked up once, and only when another language is known)."""
        if kernel_id not in self.languages and self.languages:
            with contextlib.suppress(GatewayError):
                self.languages[kernel_id] = (await client.get_kernel(ref)).get("language", "")
        known = {language for language in self.languages.values() if language}
        if len(known) < 2:
            return None
        return self.languages.get(kernel_id) or None

    async def _bind(self, client: GatewayClient, kernel: wire.Kernel) -> None:
        """Make `kernel` this conversation's kernel, holding it if it is a conversation kernel
        (and still holding the conversation's own)."""
        self.languages[kernel["id"]] = kernel.get("language", "")
        await self._hold(client, kernel)
        self.client, self.kernel = client, kernel
        await self._release_others()

    async def _hold(self, client: GatewayClient, kernel: wire.Kernel) -> None:
        """Hold `kernel` through `client` if it is a conversation kernel not held yet."""
        if kernel["lifetime"] == "conversation" and kernel["id"] not in self._holds:
            hold = Hold(client, kernel["id"], on_event=KernelActivity())
            await hold.open()
            self._holds[kernel["id"]] = hold

    def activity(self, kernel_id: str) -> KernelActivity | None:
        """Return what the hold on `kernel_id` sees it run (None: this conversation holds none)."""
        hold = self._holds.get(kernel_id)
        activity = hold.on_event if hold is not None else None
        return activity if isinstance(activity, KernelActivity) else None

    async def _release_others(self) -> None:
        """Release the holds on kernels that are neither the current one nor the own one (a
        conversation kernel's grace period then starts)."""
        kept = {self.own[1]["id"]} if self.own is not None else set()
        if self.kernel is not None:
            kept.add(self.kernel["id"])
        for kernel_id in [held for held in self._holds if held not in kept]:
            await self._holds.pop(kernel_id).aclose()

    async def attach(
        self,
        ref: str,
        gateway: str | None,
        kernel_spec: str | None,
        sandbox: str | None = None,
        fork: str | None = None,
    ) -> tuple[wire.Kernel, bool, str]:
        """Attach to (or create) the persistent kernel `ref`; return it, created, startup text.
        With `fork`, `ref` is a new kernel that starts as a copy of that kernel's state.

        A new kernel runs under the profile `sandbox` (default: the gateway's) only if that is
        at least as strict as the gateway's default: the model never widens its sandbox. An
        existing kernel is taken only if it runs under `sandbox` (when given). Nothing about the
        current binding changes until the new kernel is ready, so a typo'd gateway or kernel
        leaves everything as it was.
        """
        client = await self.gateway(gateway) if gateway else await self.gateway()
        if fork is not None:
            reply = await client.create_kernel(
                name=ref, sandbox=sandbox, stricter_only=True, fork=fork
            )
            forked = reply["kernel"]
            startup = await self._set_up_or_stop(client, forked, True)
            await self._bind(client, forked)
            self.replaced = None
            return forked, True, startup
        client, existing = await self._locate(ref, client, search=gateway is None)
        if existing is None and is_notebook_path(ref):
            raise NotFound(no_notebook_kernel(ref, client.label, "model"))
        self.replaced = None
        if existing is not None and not existing["alive"]:
            if existing["name"] != ref:  # named by its id: there is no name to start anew
                raise Unavailable(stopped_kernel_refusal(existing["id"]))
            self.replaced, existing = existing, None  # a new kernel takes the name
        if existing is not None:
            if sandbox is not None and not runs_under(existing, sandbox):
                raise Conflict(sandbox_mismatch(existing, sandbox, "model"))
            if existing.get("open_to_agents") is False:  # absent from a gateway before it said
                raise Forbidden(await closed_refusal(client, existing))
            chosen, is_new = existing, False
        else:
            chosen, is_new = await self._create(client, ref, kernel_spec, sandbox)
        theirs = not is_new and is_theirs(chosen, client.mode)
        startup = await self._set_up_or_stop(client, chosen, is_new, theirs=theirs)
        await self._bind(client, chosen)
        return chosen, is_new, startup

    async def _set_up_or_stop(
        self, client: GatewayClient, kernel: wire.Kernel, is_new: bool, *, theirs: bool = False
    ) -> str:
        """Return what setting `kernel` up said; a kernel refused for not running inspectors.py
        is stopped when it was started for this request (Uninspected, saying so)."""
        try:
            return await self.set_up(client, kernel["id"], theirs=theirs)
        except Uninspected as refused:
            if is_new:
                await client.stop_kernel(kernel["id"])
            raise Uninspected(uninspected_refusal(refused.message, stopped=is_new)) from None

    async def _create(
        self, client: GatewayClient, name: str, kernel_spec: str | None, sandbox: str | None
    ) -> tuple[wire.Kernel, bool]:
        """Return the persistent kernel `name`, started (or found) under `sandbox`, and whether
        it was started; a gateway that did not start it under `sandbox` gets it stopped again."""
        try:
            reply = await client.create_kernel(
                name=name,
                kernel_spec=kernel_spec,
                lifetime="persistent",
                cwd=self.settings.cwd if client.on_this_host else None,
                sandbox=sandbox,
                stricter_only=True,
            )
        except Forbidden as e:
            if e.details.get("open_to_agents") is False:  # the one by that name is closed
                raise
            if sandbox is None:
                raise
            default = (await client.info()).get("sandbox_default")
            refusal = looser_sandbox_refusal(sandbox, default, name, kernel_spec)
            raise Forbidden(refusal) from None
        chosen, created = reply["kernel"], reply["created"]
        if sandbox is not None and not runs_under(chosen, sandbox):
            if not created:  # it started under another profile between the look and the start
                raise Conflict(sandbox_mismatch(chosen, sandbox, "model"))
            # A gateway from before sandboxes ignores the profile: never run it less confined.
            await client.stop_kernel(chosen["id"])
            raise Unavailable(unconfined_refusal(client.where, sandbox, "model"))
        return chosen, created

    async def elsewhere(self, listed: GatewayClient) -> list[ServerKernels]:
        """Return the person's Jupyter servers other than `listed`, each with its kernels."""
        servers = running_servers(except_url=listed.url)
        return await list_server_kernels(servers, self.client_for)

    async def locate(self, ref: str) -> tuple[GatewayClient, wire.Kernel]:
        """Return the kernel `ref` names and its gateway: this conversation's, else the one
        Jupyter server of the person's that runs it (a GatewayError if none does)."""
        client, found = await self._locate(ref, await self.gateway(), search=True)
        if found is None:
            return client, await client.get_kernel(ref)  # its not-found error says what is wrong
        return client, found

    async def _locate(
        self, ref: str, client: GatewayClient, *, search: bool
    ) -> tuple[GatewayClient, wire.Kernel | None]:
        """Return the kernel `ref` names on `client`'s gateway, or (when `search`) the live one
        on a Jupyter server of the person's when that gateway has none live by that name."""
        found = await self._find(client, ref)
        if search and (found is None or not found["alive"]):
            elsewhere = await self._find_in_jupyter(ref, client)
            if elsewhere is not None:
                return elsewhere
        return client, found

    async def _find_in_jupyter(
        self, ref: str, current: GatewayClient
    ) -> tuple[GatewayClient, wire.Kernel] | None:
        """Return the one live kernel `ref` names on the person's other Jupyter servers, if any
        (a GatewayError listing them when it names kernels on several)."""
        servers = running_servers(except_url=current.url)
        found = await find_in_servers(ref, servers, self.client_for)
        if len(found) > 1:
            matches = [(client.label, kernel) for client, kernel in found]
            raise Ambiguous(several_kernels(ref, matches, "model"))
        return found[0] if found else None

    async def _find(self, client: GatewayClient, ref: str) -> wire.Kernel | None:
        try:
            return await client.get_kernel(ref)
        except NotFound:
            return None

    async def forget_kernel(self, kernel_id: str) -> wire.Kernel | None:
        """Forget `kernel_id` (it was stopped). When it was the current kernel and the
        conversation's own is another, return the own kernel as it is now: alive, it is the
        current kernel again; gone, the next run_cell starts a new one. Else return None."""
        if self.own is not None and self.own[1]["id"] == kernel_id:
            self.own = None
        current = self.kernel is not None and self.kernel["id"] == kernel_id
        if current:
            self.kernel = None
        own, back = self.own, None
        if current and own is not None:
            client, kernel = own
            try:
                back = await client.get_kernel(kernel["id"])
            except NotFound:  # its records are gone too
                back = kernel.copy()
                back["alive"] = False
            if back["alive"]:
                self.client, self.kernel = client, back
            else:
                self.own = None
        await self._release_others()
        return back

    async def close(self) -> None:
        """Send the last tool call reports; release the hold (a conversation kernel then starts
        its grace period) and clients."""
        await self.reports.flush()
        if self._early is not None:
            task = self._early[1]
            self._early = None
            task.cancel()
            await asyncio.wait([task])
            if not task.cancelled() and task.exception() is None:
                await task.result().aclose()
        for hold in self._holds.values():
            await hold.aclose()
        self._holds.clear()
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


def target_key(target: GatewayTarget) -> str:
    """Return the identity of a gateway target (its name or URL)."""
    return target.name or target.url


async def closed_refusal(client: GatewayClient, kernel: wire.Kernel) -> str:
    """Return why the model may not use `kernel`, closed to agents, on `client`'s gateway."""
    sandbox = kernel.get("sandbox")
    details = {
        "kernel": kernel["name"] or kernel["id"][:8],
        "profile": sandbox["profile"] if sandbox is not None else None,
        "default": (await client.info()).get("sandbox_default"),
    }
    return closed_to_agents_refusal(details)
