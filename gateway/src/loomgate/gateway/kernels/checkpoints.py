"""A kernel's checkpoints as clients see them: taking one (a silent cell forks the kernel's
process into a frozen copy: kernels/kernel_copy.py), listing and dropping them, and what a
rollback continues; each refusal says in one sentence why and what to do."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loomgate.gateway.errors import BadRequest, Conflict, NotFound, Unavailable
from loomgate.gateway.kernels.kernel_copy import (
    CUDA,
    PID,
    SOCKETS,
    STARTER_PID,
    THREADS,
    checkpoint_cell,
    cuda_guard,
    starter_cell,
)
from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency.kernel_command import LAUNCHER
from loomgate.gateway.residency.kernel_family import Frozen
from loomgate.gateway.residency.kernel_process import children, host_pid, runs_with
from loomgate.gateway.residency.provisioner import ResidentProvisioner
from loomgate.shared import wire
from loomgate.shared.echo import echo
from loomgate.shared.sizes import format_size

if TYPE_CHECKING:
    from loomgate.gateway.kernels.kernel import LoomKernel

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MEASURING: set[asyncio.Task[None]] = set()  # measurements after a checkpoint, until done
MAX_CHECKPOINTS = 8  # per kernel: each is a process, and holds what its kernel later changes
COPY_TIMEOUT = 30.0  # how long the cell that copies the kernel may take


def family_of(kernel: LoomKernel) -> ResidentProvisioner:
    """Return the provisioner of a kernel that can be copied, or refuse in one sentence."""
    provisioner = kernel.km.provisioner
    who = kernel.name or kernel.id[:8]
    if not isinstance(provisioner, ResidentProvisioner):
        raise Conflict(
            f"kernel {who} is not a process of this gateway (a remote or upstream kernel), and "
            "only a local process can be copied; start a kernel here to checkpoint it"
        )
    if not provisioner.copyable or not kernel.kind.ipykernel:
        implementation = kernel.kind.implementation or kernel.store.meta.get("kernel_spec")
        raise Conflict(
            f"kernel {who} runs {implementation}, which loomgate cannot copy (only ipykernel "
            "started by this gateway); save what matters to a file instead"
        )
    return provisioner


def ready(kernel: LoomKernel) -> None:
    """Refuse a copy of a kernel that is not idle."""
    who = kernel.name or kernel.id[:8]
    if kernel.phase != "ready" or kernel.channels is None:
        raise Unavailable(f"kernel {who} is {kernel.phase}; try again when it is ready")
    current = kernel.executions.current
    if current is not None:
        raise Conflict(
            f"kernel {who} is running In [{current.number}]; a copy is made between cells: "
            "wait for it or interrupt it first"
        )


def listed(kernel: LoomKernel) -> list[wire.Checkpoint]:
    """Return the kernel's checkpoints in the order they were taken (none for one that cannot
    have any)."""
    provisioner = kernel.km.provisioner
    return provisioner.family.wire() if isinstance(provisioner, ResidentProvisioner) else []


def find(kernel: LoomKernel, name: str) -> Frozen:
    """Return the checkpoint `name` of the kernel (NotFound naming the ones it has)."""
    provisioner = family_of(kernel)
    provisioner.family.forget_ended()
    frozen = provisioner.family.checkpoints.get(name)
    if frozen is None:
        names = ", ".join(provisioner.family.checkpoints) or "none"
        raise NotFound(
            f"kernel {kernel.name or kernel.id[:8]} has no checkpoint {echo(name)} (its "
            f"checkpoints: {names})"
        )
    return frozen


async def take(kernel: LoomKernel, name: str | None) -> tuple[wire.Checkpoint, list[str]]:
    """Checkpoint the kernel under `name` (default `after-N`); return it and what a copy lacks."""
    provisioner = family_of(kernel)
    ready(kernel)
    family = provisioner.family
    family.forget_ended()
    after = kernel.store.last_number
    name = name if name is not None else f"after-{after}"
    who = kernel.name or kernel.id[:8]
    if not NAME.fullmatch(name):
        raise BadRequest(
            f"checkpoint name {echo(name)} is not one: letters, digits, '.', '_' and '-', "
            "64 at most, beginning with a letter or digit"
        )
    if name in family.checkpoints:
        raise Conflict(
            f"kernel {who} already has a checkpoint {name}; drop it first or pick another name"
        )
    if len(family.checkpoints) >= MAX_CHECKPOINTS:
        oldest = next(iter(family.checkpoints))
        raise Conflict(
            f"kernel {who} holds {MAX_CHECKPOINTS} checkpoints, the most it may; drop one "
            f"first (the oldest is {oldest})"
        )
    await check_memory(kernel, provisioner)
    own = provisioner.kernel_process()
    if own is None:
        raise Unavailable(f"kernel {who}'s process was not found; try again")
    # One cell: refused with a CUDA context, else the checkpoint and (its first) the starter (a
    # restart in a sandbox with an init keeps the sandbox and the checkpoints in it; a process
    # that ends while no gateway watches comes back from it), then what a copy lacks.
    code = cuda_guard()
    expressions = {PID: PID, "threads": THREADS, "sockets": SOCKETS}
    start_order = None
    if not family.has_starter():
        start_order = provisioner.ipc_dir / f"start-{uuid.uuid4().hex}"
        code += starter_cell(start_order, STARTER_PID)
        expressions[STARTER_PID] = STARTER_PID
    order = provisioner.ipc_dir / f"checkpoint-{uuid.uuid4().hex}"
    code += checkpoint_cell(order)  # last: the copies it makes run on from its end
    values = await copying(kernel, own, code, expressions)
    now, lacks = time.time(), lacks_of(values)
    family.checkpoints[name] = Frozen(copy_of(own, values, PID), order, after, now, tuple(lacks))
    if start_order is not None:
        family.starter = Frozen(copy_of(own, values, STARTER_PID), start_order, after, now)
    await kernel.save_resident()
    kernel.events.kernel(kernel.id, "checkpoints", kernel.model())
    measuring = asyncio.get_running_loop().create_task(measured(kernel))
    MEASURING.add(measuring)  # its memory is told as soon as it is known, not in this reply
    measuring.add_done_callback(MEASURING.discard)
    return family.checkpoint(name), lacks


async def give_starter(
    kernel: LoomKernel, provisioner: ResidentProvisioner, own: ProcessIdentity
) -> None:
    """Give a confined kernel a starter, once: its restarts then start its next process inside
    its sandbox, which outlives them with what else it holds (its checkpoints in an init's
    sandbox; its forks, or its origin)."""
    family = provisioner.family
    if not family.has_starter():
        order = provisioner.ipc_dir / f"start-{uuid.uuid4().hex}"
        after = kernel.store.last_number
        family.starter = await frozen_copy(kernel, own, starter_cell(order), order, after)


async def measured(kernel: LoomKernel) -> None:
    """Measure the memory the kernel's checkpoints hold, and tell the event stream."""
    if await measure(kernel):
        kernel.events.kernel(kernel.id, "checkpoints", kernel.model())


async def measure(kernel: LoomKernel) -> bool:
    """Measure the memory the kernel's checkpoints hold; return whether it has any."""
    provisioner = kernel.km.provisioner
    if not isinstance(provisioner, ResidentProvisioner) or not provisioner.family.checkpoints:
        return False
    await provisioner.family.measure()
    return True


async def check_memory(kernel: LoomKernel, provisioner: ResidentProvisioner) -> None:
    """Refuse a checkpoint of a kernel whose checkpoints already hold half its memory limit (the
    limit counts them with the kernel: more would leave the kernel too little)."""
    limit = provisioner.rules.memory if provisioner.rules is not None else None
    if limit is None or provisioner.family.hold_at_most(limit // 2):
        return
    await provisioner.family.measure()
    held = {name: size or 0 for name, size in provisioner.family.held.items()}
    if held and sum(held.values()) * 2 > limit:
        largest = max(held, key=lambda name: held[name])
        raise Conflict(
            f"kernel {kernel.name or kernel.id[:8]}'s checkpoints hold "
            f"{format_size(sum(held.values()))}, over half its memory limit of "
            f"{format_size(limit)}; drop one first ({largest} holds the most, "
            f"{format_size(held[largest])})"
        )


async def copying(
    kernel: LoomKernel, own: ProcessIdentity, code: str, expressions: dict[str, str]
) -> dict[str, Any]:
    """Run a cell that copies the kernel's process `own`; return its expressions' values (a
    kernel holding a CUDA context refused; a cell that failed leaves none of its copies)."""
    before = set(children(own.pid))
    reply = await silent(kernel, code, expressions)
    content = reply["content"]
    if content.get("status") == "ok":
        values: dict[str, Any] = content.get("user_expressions", {})
        return values
    for pid in set(children(own.pid)) - before:  # made before the cell failed
        if runs_with(pid, LAUNCHER.name):  # a copy (a starter names it too), not the user's
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    if content.get("evalue") == CUDA:
        raise Conflict(
            f"kernel {kernel.name or kernel.id[:8]} holds a CUDA context, which a process copy "
            "cannot carry; save the state to a file instead"
        )
    raise Unavailable(f"the kernel could not be copied: {content.get('evalue')}")


def copy_of(own: ProcessIdentity, values: dict[str, Any], expression: str) -> ProcessIdentity:
    """Return the copy whose pid (as the kernel's pid namespace numbers it) `expression` gave."""
    inner = text(values.get(expression))
    if inner is None or not inner.isdigit():
        raise Unavailable("the kernel's copy did not say who it is")
    process = ProcessIdentity.of(host_pid(own.pid, int(inner)))
    if process is None:
        raise Unavailable("the kernel's copy was not found after it was made")
    return process


async def lacks(kernel: LoomKernel) -> list[str]:
    """Return what a copy of the kernel made now would not carry, in sentences."""
    reply = await silent(kernel, "", {"threads": THREADS, "sockets": SOCKETS})
    return lacks_of(reply["content"].get("user_expressions", {}))


def lacks_of(values: dict[str, Any]) -> list[str]:
    """Return what a copy of the kernel does not carry, in sentences (threads other than the
    kernel's own, sockets it shares), from a copying cell's expressions."""
    lacks = []
    threads = text(values.get("threads"))
    if threads not in (None, "[]"):
        lacks.append(f"threads {threads} run in the kernel; a copy has none of them")
    sockets = text(values.get("sockets"))
    if sockets not in (None, "[]"):
        lacks.append(
            f"sockets {sockets} are open in the kernel; a copy shares them (what one side reads "
            "there, the other does not)"
        )
    return lacks


def text(value: Any) -> str | None:
    """Return a user expression's text (None when it failed)."""
    if isinstance(value, dict) and value.get("status") == "ok":
        return str(value["data"]["text/plain"])
    return None


async def silent(kernel: LoomKernel, code: str, expressions: dict[str, str]) -> dict[str, Any]:
    """Run `code` silently in the kernel (no record, no number) and return its reply."""
    assert kernel.channels is not None
    content = {
        "code": code,
        "silent": True,
        "store_history": False,
        "user_expressions": expressions,
        "allow_stdin": False,
        "stop_on_error": False,
    }
    try:
        reply: dict[str, Any] = await kernel.channels.request(
            "execute_request", content, COPY_TIMEOUT
        )
    except TimeoutError:
        raise Unavailable("the kernel did not answer the copy in time") from None
    return reply


async def frozen_copy(
    kernel: LoomKernel, own: ProcessIdentity, code: str, order: Path, after: int
) -> Frozen:
    """Run a copying cell; return the frozen copy it forked."""
    return Frozen(await copied(kernel, own, code), order, after, time.time())


async def copied(kernel: LoomKernel, own: ProcessIdentity, code: str) -> ProcessIdentity:
    """Run a cell that copies the kernel's process `own` (its pid in PID); return the copy."""
    return copy_of(own, await copying(kernel, own, cuda_guard() + code, {PID: PID}), PID)


def drop(kernel: LoomKernel, name: str) -> None:
    """End the checkpoint `name` (NotFound when there is none)."""
    find(kernel, name)
    family_of(kernel).family.drop(name)
    kernel.events.kernel(kernel.id, "checkpoints", kernel.model())
