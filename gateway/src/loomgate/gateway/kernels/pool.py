"""Prewarmed kernels: started, idle kernels that a request for a new kernel takes at once, while
the pool starts their replacements in the background. A pool kernel is of one kernel spec,
sandbox and directory (its `PoolKey`): a sandbox is fixed when its process starts.

A pool kernel belongs to no one: it is in no kernel list (loomgate's or Jupyter's), has no
records, and ends with the gateway however the gateway exits (stopped on the way out, or, after
a SIGKILL, ended by the next gateway once it has proved the pid is still that kernel).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Literal, NamedTuple, cast

from loomgate.gateway.errors import Refusal
from loomgate.gateway.kernels.kernel_channels import Message
from loomgate.gateway.kernels.kernel_kind import KernelKind
from loomgate.gateway.kernels.manager_protocol import KernelMap, ManagedKernel, start_ended
from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency import resident
from loomgate.gateway.residency.kernel_files import remove_kernel_files
from loomgate.gateway.residency.kernel_process import own_pid, rss_bytes
from loomgate.gateway.residency.launch_arguments import LAUNCH_ARGUMENT, LaunchArguments
from loomgate.gateway.residency.launch_markers import LaunchMarkers
from loomgate.gateway.residency.provisioned import kernel_connection_file, launch_markers
from loomgate.gateway.residency.resident import ResidentError, ResidentLaunch
from loomgate.gateway.sandbox import SandboxCatalog, SandboxLaunch, SandboxRules, launch_cwd
from loomgate.shared import wire

POOL_DIR = "pool"  # in the state dir: a directory per pool kernel, its resident.json
DEFAULT_PREWARM = 1
# At a gateway's start, how long the sandbox of a leftover pool kernel killed may take to empty.
LEFTOVER_REMOVE_TIMEOUT = 0.5
# Why a key is prewarmed no more: its kernel did not start, or a claim cannot move it.
Refused = Literal["failed", "unclaimable"]
WARM_TIMEOUT = 60.0  # how long a pool kernel may take to answer kernel_info once launched


class PoolKey(NamedTuple):
    """What a pool kernel was started as: its kernel spec, sandbox rules and directory."""

    kernel_spec: str
    sandbox: SandboxRules | None  # None: a kernel whose sandbox is not loomgate's to choose
    cwd: str | None


def pool_key(spec: str, rules: SandboxRules | None, cwd: str | None) -> PoolKey:
    """Return the pool key of a kernel: a confined one is bound to its directory when its
    sandbox starts, an unconfined one moves there when claimed."""
    if rules is not None and rules.confined:
        return PoolKey(spec, rules, str(launch_cwd(cwd)))
    return PoolKey(spec, rules, None)


def serves(held: PoolKey, asked: PoolKey, exists: Callable[[Path], bool] = os.path.lexists) -> bool:
    """Return whether a pool kernel started as `held` may become the kernel `asked` for: the same
    key, or one that differs only by hiding paths gone since (another gateway's state dir)."""
    if held == asked:
        return True
    if held.sandbox is None or asked.sandbox is None or not same_place(held, asked):
        return False
    if replace(held.sandbox, hidden=()) != replace(asked.sandbox, hidden=()):
        return False
    theirs, wanted = set(held.sandbox.hidden), set(asked.sandbox.hidden)
    return wanted <= theirs and not any(exists(path) for path in theirs - wanted)


def outdated(
    held: PoolKey, asked: PoolKey, exists: Callable[[Path], bool] = os.path.lexists
) -> bool:
    """Return whether pool kernels of `held` will not be claimed again: of the kernel spec,
    profile and directory asked for, but started before what that profile means changed (a new
    gateway's state dir to hide, the person's sandbox.toml edited)."""
    profile = held.sandbox.profile if held.sandbox is not None else None
    asked_profile = asked.sandbox.profile if asked.sandbox is not None else None
    return same_place(held, asked) and profile == asked_profile and not serves(held, asked, exists)


def same_place(held: PoolKey, asked: PoolKey) -> bool:
    """Return whether two keys are of one kernel spec and directory."""
    return held.kernel_spec == asked.kernel_spec and held.cwd == asked.cwd


class KernelPool:
    """Up to `size` started, idle kernels of each key asked for (the default one at start)."""

    def __init__(
        self,
        mkm: KernelMap,
        state_dir: Path,
        size: int,
        log: logging.Logger,
        markers: LaunchMarkers | None = None,
    ) -> None:
        self.mkm = mkm
        self.markers = markers  # where its kernels' launches are marked
        self.root = state_dir / POOL_DIR
        self.size = size
        self.log = log
        self.members: dict[str, PoolKey] = {}  # kernel id → its key, starting or idle
        self.idle: dict[PoolKey, list[ManagedKernel]] = {}  # ready kernels, oldest first
        # A ready kernel's own process (inside its sandbox: not the bubblewrap launched).
        self.own_pids: dict[str, int | None] = {}
        self._fills: dict[PoolKey, asyncio.Task[None]] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        self._warming: set[asyncio.Task[bool]] = set()
        self._closing = False
        # Keys not prewarmed again: their kernel did not start, or cannot be claimed (a claim
        # moves a kernel into its directory by running Python). A start of the key outside the
        # pool that succeeds (`started`) clears a failed one.
        self.refused: dict[PoolKey, tuple[Refused, str]] = {}  # why (a cause, a sentence)

    def is_pooled(self, kernel_id: str) -> bool:
        """Return whether `kernel_id` is a pool kernel (not yet anyone's)."""
        return kernel_id in self.members

    def end_leftovers(self, kernels_root: Path) -> int:
        """End the pool kernels a gateway that did not stop cleanly left running; return how many.

        Only a process proved to be that kernel (pid, start time, boot) is signalled. One whose
        claim got as far as its own resident.json (in `kernels_root`) is a kernel now: it is left
        to be taken back.
        """
        ended = 0
        if not self.root.is_dir():
            return 0
        for child in sorted(self.root.iterdir()):
            if resident.exists(kernels_root / child.name):
                shutil.rmtree(child, ignore_errors=True)
                continue
            try:
                state = resident.load(child, child.name)
                identity = ProcessIdentity.from_json(state["provisioner"]["identity"] or {})
            except (ResidentError, ValueError) as e:
                self.log.warning("Skipping an unreadable pool kernel in %s: %s", child, e)
                shutil.rmtree(child, ignore_errors=True)
                continue
            sandbox_info = state["provisioner"].get("sandbox")
            sandbox = SandboxLaunch.from_json(sandbox_info) if sandbox_info else None
            init = sandbox.init if sandbox is not None else None
            running = identity.is_alive() or (init is not None and init.is_alive())
            if sandbox is not None:  # its init ends everything in it, bwrap gone or not
                sandbox.signal(signal.SIGKILL)
            if identity.is_alive():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(state["provisioner"].get("pgid") or identity.pid, signal.SIGKILL)
            ended += running
            if sandbox is not None:
                sandbox.remove(timeout=LEFTOVER_REMOVE_TIMEOUT)
            remove_kernel_files(state["connection_file"])
            shutil.rmtree(child, ignore_errors=True)
        return ended

    def fill_default(self, sandboxes: SandboxCatalog) -> None:
        """Start prewarming before anyone asks: the default kernel spec and profile, in the
        gateway's directory (nothing while sandbox.toml is malformed)."""
        try:
            rules = sandboxes.for_kernel(None, False, None, upstream=self.mkm.upstream)
        except Refusal as e:
            self.log.warning("Not prewarming a kernel: %s", e)
            return
        self.fill(pool_key(self.mkm.default_kernel_name, rules, None))

    def fill(self, key: PoolKey) -> None:
        """Start kernels of `key` in the background until the pool holds `size` of them (none
        of a key whose kernel did not start, or cannot be claimed)."""
        if self.size <= 0 or self._closing or key in self.refused:
            return
        task = self._fills.get(key)
        if task is None or task.done():
            self._fills[key] = asyncio.get_running_loop().create_task(self._fill(key))

    async def _fill(self, key: PoolKey) -> None:
        # A start that fails is not retried until the next claim: a broken kernel spec must
        # not keep the CPU busy starting kernels that die.
        launch: dict[str, object] = {
            "kernel_name": key.kernel_spec,
            LAUNCH_ARGUMENT: LaunchArguments(key.sandbox, markers=self.markers),
        }
        if key.cwd is not None:
            launch["cwd"] = key.cwd
        while not self._closing and len(self.idle.get(key, [])) < self.size:
            kernel_id = str(uuid.uuid4())
            self.members[kernel_id] = key
            try:
                await self.mkm.start_kernel(kernel_id=kernel_id, **launch)
                await start_ended(self.mkm, kernel_id)
            except Exception as e:
                self.members.pop(kernel_id, None)
                self._refuse(key, "failed", f"its kernel did not start: {e}")
                return
            if kernel_id not in self.members:  # stopped meanwhile
                continue
            # Its manager is the map's LoomKernelManager (jupyter types it as its base).
            km = cast("ManagedKernel", self.mkm.get_kernel(kernel_id))
            warm = asyncio.get_running_loop().create_task(self._warm(km))
            self._warming.add(warm)
            warm.add_done_callback(self._warming.discard)
            with contextlib.suppress(asyncio.CancelledError):  # stop_all: it stops the kernel
                if not await warm:
                    self.members.pop(kernel_id, None)
                    await self._stop(kernel_id)
                    return
                if key in self.refused:  # warmed, and found to be of another language
                    self.members.pop(kernel_id, None)
                    await self._stop(kernel_id)
                    return
            launched = getattr(km.provisioner, "pid", None)
            named = kernel_connection_file(km)  # a relayed kernel's own, on its command line
            found = await asyncio.to_thread(own_pid, launched, named)
            if kernel_id in self.members:
                self.own_pids[kernel_id] = found
                self.idle.setdefault(key, []).append(km)

    async def _warm(self, km: ManagedKernel) -> bool:
        """Return whether the launched `km` answered kernel_info: a pool kernel is ready once it
        has finished starting, so that a claim costs the claim alone."""
        channels = km.open_channels(on_iopub=ignore, on_stdin=ignore)
        try:
            reply = await channels.confirm(WARM_TIMEOUT, alive=lambda: has_process(km))
        except (RuntimeError, TimeoutError) as e:
            key = self.members.get(str(km.kernel_id))
            self._refuse(key, "failed", f"its kernel did not start: {e}")
            return False
        finally:
            channels.close()
        kind = KernelKind.of(reply["content"])
        if not kind.python:
            reason = f"a claim runs Python, and this kernel is {kind.describe()}"
            self._refuse(self.members.get(str(km.kernel_id)), "unclaimable", reason)
        return True

    def _refuse(self, key: PoolKey | None, cause: Refused, reason: str) -> None:
        """Prewarm no more kernels of `key`, saying why once."""
        if key is None or key in self.refused:
            return
        self.refused[key] = (cause, reason)
        self.log.warning("Not prewarming %s kernels: %s", key.kernel_spec, reason)

    def started(self, key: PoolKey) -> None:
        """Note that a kernel of `key` started outside the pool: one whose kernel did not start
        in the pool is prewarmed again (what failed may have been passing)."""
        if key in self.refused and self.refused[key][0] == "failed":
            del self.refused[key]

    async def process_started(self, km: ManagedKernel) -> None:
        """Note a pool kernel's process, so that a later gateway can end it if this one dies."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        directory = self.root / str(km.kernel_id)
        directory.mkdir(exist_ok=True, mode=0o700)
        await resident.save(directory, km, ResidentLaunch(cwd=None, env={}))
        if (markers := launch_markers(km)) is not None:
            markers.forget(str(km.kernel_id))  # the next gateway ends it by resident.json

    def take(self, key: PoolKey) -> ManagedKernel | None:
        """Return a ready kernel that `serves` `key`, no longer the pool's (None if none is
        ready); its resident.json stays until `claimed()`, so a gateway killed during the claim
        leaves a process the next one ends. Kernels `outdated` by `key` are stopped."""
        for held in [held for held, kms in self.idle.items() if kms and outdated(held, key)]:
            stale = self.idle.pop(held)
            self.log.info("Stopping %d prewarmed kernel(s): their sandbox is outdated", len(stale))
            for km in stale:
                self._release(str(km.kernel_id))
                self._spawn_stop(str(km.kernel_id))
        for held in sorted(self.idle, key=lambda held: held != key):  # `key`'s own first
            if not serves(held, key):
                continue
            ready = self.idle[held]
            while ready:
                km = ready.pop(0)
                self.members.pop(str(km.kernel_id), None)
                self.own_pids.pop(str(km.kernel_id), None)
                if has_process(km):
                    return km
                self._release(str(km.kernel_id))
                self._spawn_stop(str(km.kernel_id))
        return None

    def claimed(self, kernel_id: str) -> None:
        """Drop a taken kernel's pool resident.json: its own took over, or its claim failed and
        its process was discarded."""
        shutil.rmtree(self.root / kernel_id, ignore_errors=True)

    def _release(self, kernel_id: str) -> None:
        self.members.pop(kernel_id, None)
        self.own_pids.pop(kernel_id, None)
        shutil.rmtree(self.root / kernel_id, ignore_errors=True)

    def _spawn_stop(self, kernel_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._stop(kernel_id))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _stop(self, kernel_id: str) -> None:
        with contextlib.suppress(Exception):
            await self.mkm.shutdown_kernel(kernel_id, now=True)

    async def stop_all(self) -> int:
        """Stop every pool kernel (the gateway is exiting); return how many there were.

        A kernel being started is waited for, not cancelled: cancelling its start can leave the
        launched process unknown to the kernel manager, and kernels outlive their gateway.
        """
        self._closing = True
        for warm in list(self._warming):  # a launched kernel's wait: its process is known
            warm.cancel()
        for task in self._fills.values():
            with contextlib.suppress(Exception):
                await task
        kernel_ids = list(self.members)
        for kernel_id in kernel_ids:
            self._release(kernel_id)
            if kernel_id in self.mkm:
                await self._stop(kernel_id)
        self.idle.clear()
        return len(kernel_ids)

    def report(self) -> list[wire.PooledKernel]:
        """Return the ready pool kernels: what each pool is for (kernel spec, profile, directory),
        and each kernel's own pid and resident memory."""
        pooled: list[wire.PooledKernel] = []
        for key, kms in self.idle.items():
            for km in kms:
                pid = self.own_pids.get(str(km.kernel_id))
                pooled.append(
                    wire.PooledKernel(
                        kernel_spec=key.kernel_spec,
                        sandbox=key.sandbox.profile if key.sandbox is not None else None,
                        cwd=key.cwd,
                        pid=pid,
                        rss_bytes=rss_bytes(pid),
                        launched_pid=getattr(km.provisioner, "pid", None),
                    )
                )
        return sorted(pooled, key=lambda k: (k["kernel_spec"], k["sandbox"] or "", k["cwd"] or ""))


def has_process(km: ManagedKernel) -> bool:
    """Return whether `km`'s process is still running."""
    return km.provisioner is not None and km.provisioner.has_process


def ignore(msg: Message) -> None:
    """Take a message a pool kernel sends while it warms, and drop it."""
