"""What a kernel reference names: a kernel name, id, id prefix, or a notebook path it serves."""

from __future__ import annotations

from collections.abc import Mapping

from loomgate.gateway.errors import Ambiguous, BadRequest, NotFound, Unavailable
from loomgate.gateway.kernels.notebooks import serving
from loomgate.gateway.records.store import RecordStore
from loomgate.shared.echo import echo

MIN_PREFIX = 4


def find_store(ref: str, stores: dict[str, RecordStore], live: Mapping[str, object]) -> RecordStore:
    """Return the records of the kernel `ref` names (a name, id, id prefix or notebook path),
    live or gone (live ones win)."""
    ref = ref.strip()
    if not ref:
        raise BadRequest("a kernel reference (name, id or id prefix) is required")
    if ref in stores:
        return stores[ref]
    by_name = [s for s in stores.values() if s.meta.get("name") == ref]
    live_named = [s for s in by_name if s.kernel_id in live]
    if live_named:
        return live_named[0]
    if by_name:
        return max(by_name, key=lambda s: float(s.meta.get("created") or 0))
    by_path = serving(ref, list(stores.values()), live)
    if by_path is not None:
        return by_path
    if len(ref) >= MIN_PREFIX:
        matches = [s for s in stores.values() if s.kernel_id.startswith(ref)]
        running = [s for s in matches if s.kernel_id in live]
        if len(running) == 1 or (len(matches) == 1):
            return (running or matches)[0]
        if matches:
            ids = ", ".join(s.kernel_id[:12] for s in matches[:5])
            raise Ambiguous(f"kernel prefix {echo(ref)} matches several kernels: {ids}")
    raise NotFound(
        f"no kernel named {echo(ref)}, with an id starting {echo(ref)}, "
        f"or serving a notebook {echo(ref)}"
    )


def gone(store: RecordStore, now: float) -> Unavailable:
    """Return the refusal of a request that needs the kernel of `store`, which is gone: when
    and how it ended, and that its records stay readable."""
    meta = store.meta
    label = f"named {meta['name']}" if meta.get("name") else store.kernel_id[:8]
    ended, reason = meta.get("ended"), meta.get("end_reason")
    if ended is None:  # left running by an earlier gateway, not taken back (yet)
        how = f"not running: {reason}" if reason else "not running"
    elif reason:
        how = f"ended {ago(now - ended)}: {reason}"
    else:
        how = f"stopped {ago(now - ended)}"
    return Unavailable(
        f"no kernel {label} ({how}; its records are still readable)", kernel_id=store.kernel_id
    )


def ago(seconds: float) -> str:
    """Return how long ago something happened, in the largest whole unit ("3 s ago")."""
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if unit == 'day' and count > 1 else ''} ago"
    return f"{max(0, int(seconds))} s ago"
