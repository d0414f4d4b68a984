"""A fork: a new kernel whose first process is a copy of another kernel's live state, or of one
of its checkpoints (`"fork": "K"` or `"K@CHECKPOINT"`, SPEC §10); its origin is untouched, and
each refusal says in one sentence why and what to do."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loomgate.gateway.errors import BadRequest, Conflict, Unavailable
from loomgate.gateway.kernels import checkpoints
from loomgate.gateway.kernels.kernel_copy import fork_cell
from loomgate.gateway.kernels.manager_protocol import start_ended
from loomgate.gateway.kernels.open_to_agents import closed_refusal
from loomgate.gateway.kernels.start_options import KernelIntent, check_name_and_lifetime
from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency import shared_dirs
from loomgate.gateway.residency.launch_arguments import LAUNCH_ARGUMENT, LaunchArguments
from loomgate.shared import wire
from loomgate.shared.echo import echo

if TYPE_CHECKING:
    from loomgate.gateway.kernels.kernel import LoomKernel
    from loomgate.gateway.kernels.registry import KernelRegistry


def origin_of(fork: str) -> tuple[str, str | None]:
    """Return the kernel and the checkpoint (None: its live state) `"K[@CHECKPOINT]"` names."""
    ref, at, checkpoint = fork.rpartition("@") if "@" in fork else (fork, "", "")
    if not ref or (at and not checkpoint):
        raise BadRequest(f"fork must be a kernel, or KERNEL@CHECKPOINT, not {echo(fork)}")
    return ref, checkpoint or None


async def start_fork(
    registry: KernelRegistry,
    fork: str,
    *,
    name: str | None,
    lifetime: str,
    sandbox: str | None,
    agent: bool,
) -> LoomKernel:
    """Start the kernel `name`, a fork of what `fork` names; return it once it is ready."""
    checked = check_name_and_lifetime(name, lifetime)
    ref, checkpoint = origin_of(fork)
    origin = registry.resolve(ref)
    if agent and not origin.store.open_to_agents:
        raise closed_refusal(origin.store, registry.sandboxes.default_name())
    provisioner = checkpoints.family_of(origin)
    rules = provisioner.rules
    if sandbox is not None and (rules is None or sandbox != rules.profile):
        profile = rules.profile if rules is not None else "none"
        raise Conflict(
            f"a fork runs under its origin's profile ({profile}), never another: leave out "
            f"sandbox, or connect to a new kernel under {sandbox}"
        )
    if name is not None and registry.find_live_by_name(name) is not None:
        raise Conflict(f"a kernel named {name} runs already; give the fork a new name")
    if checkpoint is None or provisioner.sandbox is not None:
        checkpoints.ready(origin)  # copied now: its state, or its starter (below)
    if checkpoint is None:
        after, lacks = origin.store.last_number, await checkpoints.lacks(origin)
        copy_from: Any = lambda path: live_copy(origin, path)  # noqa: E731
    else:
        frozen = checkpoints.find(origin, checkpoint)
        after, lacks, copy_from = frozen.after, list(frozen.lacks), frozen.live_copy
    forked_from = wire.ForkedFrom(
        kernel=origin.id, name=origin.name, checkpoint=checkpoint, after=after, lacks=lacks
    )
    intent = KernelIntent(
        name=name,
        lifetime=checked,
        cwd=origin.store.meta.get("cwd"),
        env={},
        open_to_agents=origin.store.open_to_agents,
        forked_from=forked_from,
    )
    if provisioner.sandbox is not None:
        # Both kernels use one sandbox from now on: a restart of either starts its next
        # process in there, from a starter of its own, and leaves the other's.
        await checkpoints.give_starter(origin, provisioner, own_process(origin))
    origin_dir = provisioner.kernel_dir()
    shared_dirs.join(origin_dir, origin.id)
    kernel_id = str(uuid.uuid4())
    registry.expect_start(kernel_id, intent)
    launch = LaunchArguments(
        rules,
        markers=registry.launches,
        copy_from=copy_from,
        origin_dir=origin_dir,
        origin_sandbox=provisioner.sandbox,
    )
    kwargs: dict[str, Any] = {"kernel_name": origin.km.kernel_name, LAUNCH_ARGUMENT: launch}
    if provisioner.cwd is not None:
        kwargs["cwd"] = str(provisioner.cwd)
    await registry.mkm.start_kernel(kernel_id=kernel_id, **kwargs)
    await start_ended(registry.mkm, kernel_id)
    kernel = registry.live.get(kernel_id)
    if kernel is None:
        raise Unavailable("the fork failed to start; see the gateway log")
    if provisioner.sandbox is not None:
        await checkpoints.give_starter(kernel, checkpoints.family_of(kernel), own_process(kernel))
    return kernel


async def live_copy(origin: LoomKernel, connection_file: Path) -> ProcessIdentity:
    """Fork `origin`'s process into a live kernel on `connection_file`; return that process."""
    checkpoints.ready(origin)
    return await checkpoints.copied(origin, own_process(origin), fork_cell(connection_file))


def own_process(kernel: LoomKernel) -> ProcessIdentity:
    """Return the kernel's own process (Unavailable when it is not found)."""
    own = checkpoints.family_of(kernel).kernel_process()
    if own is None:
        raise Unavailable(f"kernel {kernel.name or kernel.id[:8]}'s process was not found")
    return own
