"""Attaching, by its id, a kernel that runs on the upstream but was started by someone else."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from tornado import web

from loomgate.gateway.errors import Ambiguous, NotFound, Refusal, Unavailable
from loomgate.gateway.kernels.references import MIN_PREFIX
from loomgate.gateway.kernels.start_options import KernelIntent
from loomgate.gateway.records.store import RecordStore
from loomgate.shared.echo import echo

if TYPE_CHECKING:
    from loomgate.gateway.kernels.registry import KernelRegistry


def is_kernel_id(ref: str) -> bool:
    """Return whether `ref` is a whole kernel id (a UUID), not a prefix or a name."""
    try:
        return str(uuid.UUID(ref)) == ref
    except ValueError:
        return False


async def attach(registry: KernelRegistry, ref: str) -> RecordStore | None:
    """Return the records of the upstream's kernel whose id is, or starts with, `ref`, attached
    now; its records start here, and say so (None when no kernel of the upstream matches, or
    the gateway is not in upstream mode)."""
    mkm = registry.mkm
    if not mkm.upstream or len(ref) < MIN_PREFIX:
        return None
    if is_kernel_id(ref):  # asked for directly: an upstream may refuse to list its kernels
        matches = [ref]
    else:
        models = await mkm.list_upstream()
        matches = [str(m["id"]) for m in models if str(m["id"]).startswith(ref)]
    if len(matches) > 1:
        ids = ", ".join(kernel_id[:12] for kernel_id in matches[:5])
        raise Ambiguous(f"kernel prefix {echo(ref)} matches several upstream kernels: {ids}")
    if not matches:
        return None
    intent = KernelIntent(lifetime="persistent", attached=time.time())
    try:
        await mkm.start_kernel(kernel_id=matches[0], loom_intent=intent)
    except web.HTTPError as e:
        cause = e.__cause__
        if isinstance(cause, NotFound):
            return None
        raise cause if isinstance(cause, Refusal) else Unavailable(str(e)) from None
    return registry.stores[matches[0]]
