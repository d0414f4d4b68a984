"""Kernels by the notebooks that use them: the Jupyter session paths kept in their records."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping

from loomgate.gateway.errors import Ambiguous
from loomgate.gateway.records.store import RecordStore
from loomgate.shared.echo import echo


def serving(ref: str, stores: list[RecordStore], live: Container[str]) -> RecordStore | None:
    """Return the records of the kernel serving the notebook (or console) `ref`: its Jupyter
    session path, or that path's unique tail (`analysis.ipynb` for `work/analysis.ipynb`); a
    live kernel wins over gone ones, which the latest to end stands for."""
    tail = "/" + ref.lstrip("/")
    matches = [
        store
        for store in stores
        if any(path == ref or path.endswith(tail) for path in store.meta.get("paths", []))
    ]
    if not matches:
        return None
    running = [store for store in matches if store.kernel_id in live]
    if len(running) == 1:
        return running[0]
    if running:
        listed = ", ".join(
            f"{store.kernel_id[:8]} ({', '.join(store.meta['paths'])})" for store in running[:5]
        )
        raise Ambiguous(f"{echo(ref)} matches the notebooks of several kernels: {listed}")
    return max(matches, key=lambda store: float(store.meta.get("ended") or 0))


def note_paths(
    stores: Mapping[str, RecordStore], live: Iterable[str], paths: Mapping[str, list[str]]
) -> None:
    """Keep, for each live kernel, the Jupyter session paths that use it now (by kernel id)."""
    for kernel_id in live:
        store = stores.get(kernel_id)
        if store is not None:
            store.note_paths(sorted(paths.get(kernel_id, [])))
