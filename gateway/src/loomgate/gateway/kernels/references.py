"""What a kernel reference names: a kernel name, id, id prefix, or a notebook path it serves."""

from __future__ import annotations

from collections.abc import Mapping

from loomgate.gateway.errors import Ambiguous, BadRequest, NotFound
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
