"""Every kernel the gateway knows: live ones, gone ones whose records remain, names, holders.

Longer than 400 lines: loading the archive, taking kernels back, and the hooks of every start,
restart and end read and change the same maps of live kernels, stores and intents.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jupyter_client.manager import KernelManager
from tornado import web

from loomgate.gateway.errors import (
    BadRequest,
    Refusal,
    StoppedWhileStarting,
    Unavailable,
)
from loomgate.gateway.events import EventBus
from loomgate.gateway.jupyter_internals import update_launch_arguments
from loomgate.gateway.kernels import checkpoints
from loomgate.gateway.kernels.holders import DEFAULT_IDLE_CAP, Holders
from loomgate.gateway.kernels.kernel import (
    CONFIRM_TIMEOUT,
    START_TIMEOUT,
    LoomKernel,
)
from loomgate.gateway.kernels.manager_protocol import (
    KernelMap,
    ManagedKernel,
    kernel_id_of,
    start_ended,
)
from loomgate.gateway.kernels.messages import claim_content
from loomgate.gateway.kernels.open_to_agents import closed_refusal
from loomgate.gateway.kernels.pool import KernelPool, PoolKey, pool_key
from loomgate.gateway.kernels.references import find_store, gone
from loomgate.gateway.kernels.start_options import (
    KernelIntent,
    check_existing,
    check_name_and_lifetime,
    kernel_environment,
    validated_cwd,
)
from loomgate.gateway.records.last_seen import Heartbeat, read_last_seen
from loomgate.gateway.records.store import RecordStore, probe_writable
from loomgate.gateway.residency import resident
from loomgate.gateway.residency.kernel_files import remove_kernel_files
from loomgate.gateway.residency.launch_arguments import LAUNCH_ARGUMENT, LaunchArguments
from loomgate.gateway.residency.launch_markers import LAUNCHING_DIR, LaunchMarkers
from loomgate.gateway.residency.provisioned import process_ending, sandbox_of
from loomgate.gateway.residency.resident import ResidentLaunch
from loomgate.gateway.residency.take_back import TakeBack
from loomgate.gateway.sandbox import SandboxCatalog, launch_cwd
from loomgate.shared import wire
from loomgate.shared.echo import echo

RECORDS_DIR = "kernels"  # in the state dir: a directory per kernel, its records and resident.json
DEFAULT_GRACE_SECONDS = 600.0
UPSTREAM_LEFT = (
    "not attached since the gateway restarted; if it still runs on the upstream, connecting "
    "to it by its id attaches it again"
)
DEFAULT_RETENTION_DAYS = 7.0


class KernelRegistry:
    """Maps ids, id prefixes and names to kernels; owns record stores and lifetimes."""

    def __init__(
        self,
        mkm: KernelMap,
        state_dir: Path,
        events: EventBus,
        *,
        grace_seconds: float,
        retention_seconds: float,
        log: logging.Logger,
        prewarm: int = 0,
        idle_cap: int = DEFAULT_IDLE_CAP,
    ) -> None:
        self.mkm = mkm
        self.root = state_dir / RECORDS_DIR
        self.events = events
        self.retention_seconds = retention_seconds
        self.log = log
        self.live: dict[str, LoomKernel] = {}
        self.stores: dict[str, RecordStore] = {}
        self._intents: dict[str, KernelIntent] = {}
        self._stop_asked: set[str] = set()  # kernels stopped while still being launched
        self._discarding: set[asyncio.Task[None]] = set()  # processes of failed restarts
        self.holders = Holders(
            events,
            grace_seconds,
            log,
            is_live=lambda kernel: kernel.id in self.live,
            stop=self.stop,
            idle_cap=idle_cap,
        )
        self._left_running: list[RecordStore] = []
        self.launches = LaunchMarkers(state_dir / LAUNCHING_DIR)
        self.taking_back = TakeBack(
            mkm,
            self.live,
            events,
            log,
            lambda km, store, launch: LoomKernel(km, store, events, log, launch),
            self.wire_up,
            self.launches,
        )
        # `loomgate gateway stop` sets this; any other exit leaves the kernels running.
        self.stop_kernels_on_exit = False
        # Set once the kernels an earlier gateway left running have been taken back (or not).
        self.ready = asyncio.Event()
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.pool = KernelPool(mkm, state_dir, prewarm, log, self.launches)
        self.sandboxes = SandboxCatalog(state_dir)
        self._left_seen = read_last_seen(state_dir)  # before this gateway's own beat
        self.heartbeat = Heartbeat(state_dir, lambda: list(self.live), log)
        self._load_archive()

    # -- the archive of earlier kernels -------------------------------------------------------

    def _load_archive(self) -> None:
        now = time.time()
        for child in sorted(self.root.iterdir()):
            if not (child / "kernel.json").exists():
                continue
            try:
                store = RecordStore.load(child)
            except (OSError, ValueError) as e:
                self.log.warning("Skipping unreadable kernel records in %s: %s", child, e)
                continue
            store.left_seen = self._left_seen.get(store.kernel_id, 0.0)
            if store.meta.get("ended") is None:
                if resident.exists(child):
                    self.stores[store.kernel_id] = store
                    self._left_running.append(store)  # taken back, or not, in take_back()
                    continue
                store.all()  # loading marks the records that were running `lost`
                store.mark_ended(
                    UPSTREAM_LEFT
                    if self.mkm.upstream
                    else "the gateway that ran it stopped without leaving it running"
                )
            if now - (store.meta["ended"] or 0) > self.retention_seconds:
                shutil.rmtree(child, ignore_errors=True)
                continue
            self.stores[store.kernel_id] = store

    async def take_back(self) -> None:
        """Take back the kernels an earlier gateway left running; then serve requests."""
        began = time.monotonic()
        self.launches.end_unowned(self.log)
        if ended := self.pool.end_leftovers(self.root):
            self.log.info("Ended %d prewarmed kernel(s) an earlier gateway left running", ended)
        try:
            await self.taking_back.all(self._left_running)
        finally:
            if self._left_running:
                self.log.info(
                    "Took back %d of %d kernels in %.3f s",
                    sum(1 for store in self._left_running if store.kernel_id in self.live),
                    len(self._left_running),
                    time.monotonic() - began,
                )
            self._left_running = []
            self.heartbeat.start()
            self.ready.set()
        self.pool.fill_default(self.sandboxes)

    def leave_all(self) -> int:
        """Let go of every live kernel without ending it (the gateway exits); return how many."""
        self.holders.forget_all()
        self.heartbeat.stop()
        kernels = list(self.live.values())
        for kernel in kernels:
            kernel.leave()
        return len(kernels)

    def purge_expired(self) -> None:
        """Delete records of kernels that ended longer ago than the retention period."""
        now = time.time()
        for kernel_id, store in list(self.stores.items()):
            ended = store.meta.get("ended")
            if kernel_id not in self.live and ended and now - ended > self.retention_seconds:
                shutil.rmtree(store.directory, ignore_errors=True)
                del self.stores[kernel_id]

    # -- hooks from the kernel manager --------------------------------------------------------

    async def process_started(self, km: ManagedKernel, intent: KernelIntent | None = None) -> None:
        """Attach loomgate to a kernel process that just started (first start or restart);
        `intent` says what it was started as (else the one `create` left for its id)."""
        if self.pool.is_pooled(kernel_id_of(km)):
            await self.pool.process_started(km)
            return
        kernel = self.live.get(kernel_id_of(km))
        if kernel is not None:
            try:
                await kernel.process_started()
            except Exception as e:
                # Raised, so that jupyter_client starts no restarter for a process that did not
                # start (it would start it again and again); the kernel is gone.
                if not isinstance(e, StoppedWhileStarting):
                    self._restart_failed(kernel, e)
                raise
            return
        if intent is None:
            intent = self._intents.pop(kernel_id_of(km), {})
        if kernel_id_of(km) in self._stop_asked:  # stopped before it could answer anything
            self._stop_asked.discard(kernel_id_of(km))
            await self._discard_process(km)
            raise StoppedWhileStarting
        await self._make_kernel(km, intent)

    def expect_start(self, kernel_id: str, intent: KernelIntent) -> None:
        """Note what the kernel `kernel_id`, about to start elsewhere than `create` (the
        standard Jupyter API), is started as."""
        self._intents[kernel_id] = intent

    async def _make_kernel(
        self, km: ManagedKernel, intent: KernelIntent, prepare: dict[str, Any] | None = None
    ) -> None:
        """Give the started process `km` its records and make it a live kernel (its process is
        discarded if that fails); `prepare` runs in it first (a claimed pool kernel's move)."""
        store = self.stores.get(kernel_id_of(km))
        taken_back = store is not None  # a kernel on an upstream, attached again
        try:
            if store is not None:
                store.reopen()  # its records and numbering go on
            else:
                store = RecordStore.create(
                    self.root / kernel_id_of(km),
                    {
                        "id": kernel_id_of(km),
                        "name": intent.get("name"),
                        "lifetime": intent.get("lifetime", "persistent"),
                        "kernel_spec": km.kernel_name,
                        "cwd": intent.get("cwd"),
                        "attached": intent.get("attached"),
                        "forked_from": intent.get("forked_from"),
                        "sandbox": sandbox_of(km),
                        # On an upstream, which starts every kernel alike, one attached too.
                        "open_to_agents": intent.get("open_to_agents", bool(self.mkm.upstream)),
                    },
                )
        except Exception:
            await self._discard_process(km)
            raise
        self.stores[kernel_id_of(km)] = store
        launch = ResidentLaunch(cwd=intent.get("cwd"), env=intent.get("env") or {})
        kernel = self.live[kernel_id_of(km)] = LoomKernel(km, store, self.events, self.log, launch)
        try:
            if taken_back:  # the same process as before: its counter and variables as they are
                await kernel.take_back(None, CONFIRM_TIMEOUT)
            else:
                await kernel.process_started(prepare)
        except Exception as e:
            self.live.pop(kernel.id, None)
            kernel.close_channels()
            stopped = isinstance(e, StoppedWhileStarting)
            if stopped or taken_back:
                kernel.store.mark_ended(str(e) if stopped else "its start failed")
            else:  # it never ran a cell: nothing to list
                self.stores.pop(kernel.id, None)
                shutil.rmtree(kernel.store.directory, ignore_errors=True)
            await self._discard_process(km)
            kernel.process_gone()  # whoever waits for the start to settle goes on
            raise
        self.wire_up(kernel)

    def _restart_failed(self, kernel: LoomKernel, error: Exception) -> None:
        """End a kernel whose process did not start again (a reset, or a restart after a death):
        its records say why, its process is ended and it leaves jupyter_server's map."""
        said = error.message if isinstance(error, Refusal) else str(error)
        self.log.warning("Kernel %s did not start again: %s", kernel.id, said)
        self._process_dead(kernel, f"it did not start again: {said}")

        async def discard() -> None:
            await self._discard_process(kernel.km)
            with contextlib.suppress(Exception):  # its failed start: jupyter_client forgets it
                await self.mkm.shutdown_kernel(kernel.id, now=True)

        task = asyncio.get_running_loop().create_task(discard())
        self._discarding.add(task)
        task.add_done_callback(self._discarding.discard)

    def wire_up(self, kernel: LoomKernel) -> None:
        """Follow a live kernel's deaths and restarts, and start a lone conversation's grace."""
        kernel.km.add_restart_callback(lambda: kernel.process_died(restarting=True), "restart")
        kernel.km.add_restart_callback(lambda: self._process_dead(kernel), "dead")
        if kernel.lifetime == "conversation" and kernel.holders == 0:
            self.holders.start_grace(kernel)

    async def _discard_process(self, km: ManagedKernel) -> None:
        """Kill the process of a kernel whose start failed (jupyter_client leaves it running).

        Not through `shutdown_kernel`: that would replace the manager's failed `ready` future
        with a successful one, and the failure would never reach the caller of the start.
        """
        if self.mkm.upstream:
            return  # not a process here: the upstream's manager ends it there
        try:
            km.stop_restarter()
            if km.provisioner is not None:
                await km.provisioner.kill()
                await km.provisioner.wait()
            await km.cleanup_resources(restart=False)
        except Exception:
            self.log.exception("Could not clean up the failed kernel %s", kernel_id_of(km))

    def process_stopping(self, km: ManagedKernel, *, restart: bool) -> None:
        """Tell the kernel its process is being shut down (for a restart or for good)."""
        kernel = self.live.get(kernel_id_of(km))
        if kernel is not None:
            kernel.process_stopping(restart=restart)

    def process_gone(self, km: ManagedKernel, reason: str | None = None) -> None:
        """Forget a kernel whose process has been shut down for good (its records stay);
        `reason` says why when nobody stopped it."""
        kernel = self.live.pop(kernel_id_of(km), None)
        if kernel is None:
            return
        kernel.process_stopping(restart=False)
        self.holders.forget(kernel.id)
        kernel.store.mark_ended(reason)
        resident.remove(kernel.store.directory)
        kernel.process_gone()
        self.events.kernel(kernel.id, "stopped", kernel.model(), reason)

    def _process_dead(self, kernel: LoomKernel, reason: str | None = None) -> None:
        kernel.process_died(restarting=False)
        self.process_gone(kernel.km, reason or process_ending(kernel.km).reason)
        remove_kernel_files(kernel.km.connection_file, keep_log_in=kernel.store.directory)

    # -- lookup -------------------------------------------------------------------------------

    def resolve(self, ref: str) -> LoomKernel:
        """Return the live kernel named `ref`, with id `ref`, or with id prefix `ref`."""
        store = self.resolve_store(ref)
        kernel = self.live.get(store.kernel_id)
        if kernel is None:
            raise gone(store, time.time())
        return kernel

    def resolve_store(self, ref: str) -> RecordStore:
        """Return the records of the kernel `ref` names, live or gone (live ones win)."""
        return find_store(ref, self.stores, self.live)

    def find_live_by_name(self, name: str) -> LoomKernel | None:
        """Return the live kernel called `name`, if any."""
        return next((k for k in self.live.values() if k.name == name), None)

    # -- creating and stopping ----------------------------------------------------------------

    async def create(
        self,
        *,
        name: str | None,
        kernel_spec: str | None,
        lifetime: str,
        cwd: str | None,
        env: dict[str, str] | None,
        sandbox: str | None = None,
        stricter_only: bool = False,
        open_to_agents: bool = False,
    ) -> tuple[LoomKernel, bool]:
        """Return the live kernel called `name`, else a new one under profile `sandbox` (else the
        default; a model's `stricter_only` refuses a looser one, and a kernel not open to agents),
        and whether it is new. `open_to_agents`: the person opens it to agents, new or not."""
        checked = check_name_and_lifetime(name, lifetime)
        if name is not None:
            existing = self.find_live_by_name(name)
            if existing is not None:
                check_existing(existing.store.meta, name, kernel_spec, sandbox)
                if open_to_agents:
                    existing.store.note_open_to_agents(True)
                elif stricter_only and not existing.store.open_to_agents:
                    raise closed_refusal(existing.store, self.sandboxes.default_name())
                return existing, False
        specs = await self.kernel_specs()
        spec = kernel_spec or self.mkm.default_kernel_name
        if spec not in specs:
            raise BadRequest(f"no kernel spec named {echo(spec)} on this gateway")
        kwargs: dict[str, Any] = {"kernel_name": spec}
        if cwd is not None:
            kwargs["cwd"] = validated_cwd(cwd)
        if env:
            kwargs["env"] = kernel_environment(env)
        rules = self.sandboxes.for_kernel(
            sandbox, stricter_only, kwargs.get("cwd"), upstream=self.mkm.upstream
        )
        if not self.mkm.upstream:  # a local process: what its provisioner launches it with
            kwargs[LAUNCH_ARGUMENT] = LaunchArguments(rules, markers=self.launches)
        probe_writable(self.root)
        # On an upstream, which starts every kernel alike, a model's and the person's.
        opened = (
            open_to_agents
            or stricter_only
            or (rules is None and self.mkm.upstream is not None)
            or self.sandboxes.open_to_agents(rules, launch_cwd(kwargs.get("cwd")))
        )
        intent = KernelIntent(
            name=name, lifetime=checked, cwd=kwargs.get("cwd"), env=env or {}, open_to_agents=opened
        )
        claimed = await self._claim(pool_key(spec, rules, kwargs.get("cwd")), intent, kwargs)
        if claimed is not None:
            return claimed, True
        kernel_id = str(uuid.uuid4())
        self._intents[kernel_id] = intent
        try:
            if self.mkm.upstream:  # the upstream gives the id
                kernel_id = await self.mkm.start_kernel(loom_intent=intent, **kwargs)
            else:
                await self.mkm.start_kernel(kernel_id=kernel_id, **kwargs)
            await start_ended(self.mkm, kernel_id)  # its intent is read once the process runs
        except web.HTTPError as e:  # the kernel manager's report of a start that failed
            cause = e.__cause__
            raise cause if isinstance(cause, Refusal) else Unavailable(str(e)) from None
        except Exception as e:
            self.log.exception("Kernel %s (%s) failed to start", kernel_id, spec)
            raise Unavailable(f"the {spec} kernel failed to start: {e}") from None
        finally:
            self._intents.pop(kernel_id, None)
        kernel = self.live.get(kernel_id)
        if kernel is None:
            raise Unavailable("the kernel failed to start; see the gateway log")
        self.pool.started(pool_key(spec, rules, kwargs.get("cwd")))
        return kernel, True

    async def kernel_specs(self) -> list[str]:
        """Return the names of the kernel specs kernels can be started with."""
        return await self.mkm.kernel_specs()

    async def _claim(
        self, key: PoolKey, intent: KernelIntent, launch: dict[str, Any]
    ) -> LoomKernel | None:
        """Return a prewarmed kernel of `key` made the kernel `intent` asks for (None when the
        pool has none ready, or the one it had failed: then a kernel is started as usual)."""
        km = self.pool.take(key)
        if km is None:
            self.pool.fill(key)
            return None
        # What a restart of this kernel starts with: the directory and environment asked for.
        assert isinstance(km, KernelManager)  # a pool kernel is a local process
        update_launch_arguments(km, {k: v for k, v in launch.items() if k in ("cwd", "env")})
        try:
            await self._make_kernel(
                km, intent, claim_content(intent.get("cwd"), intent.get("env") or {})
            )
        except Refusal as e:
            self.log.warning("A prewarmed kernel could not be claimed (%s); starting one", e)
            return None
        finally:
            self.pool.claimed(kernel_id_of(km))
            # The next pool kernel starts once this one is the caller's: its start would take
            # the CPU and the event loop from the claim.
            self.pool.fill(key)
        return self.live.get(kernel_id_of(km))

    async def stop(self, kernel: LoomKernel) -> None:
        """Shut the kernel down (its records stay)."""
        await self.settle(kernel)
        await self.mkm.shutdown_kernel(kernel.id)

    async def reset(self, kernel: LoomKernel) -> None:
        """Restart the kernel process: state cleared, records and numbering kept."""
        await self.settle(kernel)
        await self.mkm.restart_kernel(kernel.id, now=True)

    async def rollback(self, kernel: LoomKernel, to: str) -> wire.Checkpoint:
        """Make the kernel's state the checkpoint `to`'s again: a restart whose process is the
        checkpoint's live copy (records and numbering kept; the checkpoint stays)."""
        await self.settle(kernel)
        provisioner = checkpoints.family_of(kernel)
        frozen = checkpoints.find(kernel, to)
        if kernel.executions.current is not None:
            checkpoints.ready(kernel)  # the refusal of a running cell
        kernel.rolling_back = f"rolled back to {to} (the state after In [{frozen.after}])"
        provisioner.family.replace_from = frozen
        try:
            await self.mkm.restart_kernel(kernel.id, now=True)
        finally:
            provisioner.family.replace_from = None
            kernel.rolling_back = None
        return provisioner.family.checkpoint(to)

    async def settle(self, kernel: LoomKernel) -> None:
        """Return once a start or restart of `kernel` in progress has ended.

        jupyter_client cannot shut down or restart a kernel manager whose `ready` future is
        still pending (InvalidStateError), and the process it is starting would be left behind.
        """
        await kernel.settle()
        with contextlib.suppress(Exception):  # a failed start: shutdown handles that itself
            ready = self.mkm.get_kernel(kernel.id).ready  # gone from the map if it failed
            assert isinstance(ready, asyncio.Future)  # an async kernel manager's
            await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT)

    async def settle_all(self) -> None:
        """Return once no live kernel is starting or restarting."""
        await asyncio.gather(*(self.settle(kernel) for kernel in list(self.live.values())))

    def abandon_starts(self, kernel_ids: Iterable[str] = ()) -> None:
        """Give up every start and restart in progress (the kernels are being stopped): each
        ends now, its process ended, rather than holding the stop until the kernel answers or
        its start times out; `kernel_ids` (the kernel map's) also covers kernels still being
        launched, which are ended as their launch returns."""
        for kernel in list(self.live.values()):
            kernel.abandon_start()
        self._stop_asked.update(set(kernel_ids) - set(self.live))

    def abandon_start(self, kernel_id: str) -> None:
        """Give up the start in progress of one kernel being stopped (as `abandon_starts`)."""
        kernel = self.live.get(kernel_id)
        if kernel is not None:
            kernel.abandon_start()
        elif not self.pool.is_pooled(kernel_id):
            self._stop_asked.add(kernel_id)
