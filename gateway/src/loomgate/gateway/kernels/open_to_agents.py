"""The refusals of a model's calls on kernels it may not use: those not open to agents (whose
profile was looser than the default when they started, and the person did not open them)."""

from __future__ import annotations

from loomgate.gateway.errors import Forbidden
from loomgate.gateway.records.store import RecordStore

ONLY_THE_PERSON_OPENS = (
    "only the person opens a kernel to agents (`loomgate agents open KERNEL`, or "
    "`loomgate run --open-to-agents`)"
)


def closed_refusal(store: RecordStore, default: str | None) -> Forbidden:
    """Return the refusal of a model's call on the kernel of `store`, closed to agents."""
    meta = store.meta
    label = meta.get("name") or store.kernel_id[:8]
    sandbox = meta.get("sandbox")
    profile = sandbox["profile"] if sandbox is not None else None
    runs = (
        f"runs under the sandbox profile {profile}, looser than this gateway's default "
        f"({default or 'not readable now'})"
        if profile is not None
        else "is not sandboxed by loomgate"
    )
    return Forbidden(
        f"kernel {label} {runs}, and the person has not opened it to agents "
        f"(`loomgate agents open {label}`)",
        kernel=label,
        profile=profile,
        default=default,
        open_to_agents=False,
    )
