"""A kernel's records as one nbformat 4 notebook: the chosen executions' cells in execution
order (a fork's, whole, after its origin's up to the fork), the markdown where the kernel's
state was lost, and the kernelspec and language_info that open it on the right kernel. Hidden
setup (startup.py, inspectors) has no records, so it is never in it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from loomgate.gateway import __version__
from loomgate.gateway.export.cells import Cell, code_cell, fork_cell, note_cell, restart_cell
from loomgate.gateway.export.selection import Selection
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.records.stored_meta import Restart
from loomgate.shared.wire import ForkedFrom

MEDIA_TYPE = "application/x-ipynb+json"
DEFAULT_MAX_LINES = 10_000  # of one cell's output; its head and tail are kept beyond it


@dataclass(frozen=True)
class NotebookSpec:
    """The kernelspec a notebook names: the spec's name, display name and language."""

    name: str
    display_name: str
    language: str | None


def restarts_of(store: RecordStore, records: list[ExecutionRecord]) -> list[Restart]:
    """Return the times the kernel's state was lost, oldest first: as kernel.json notes them,
    or, for records from before it did, as the cells a reset killed or a death ended show."""
    noted = store.meta.get("restarts")
    if noted is not None:
        return list(noted)
    inferred: list[Restart] = []
    for record in records:
        meta = record.meta
        at = meta["finished"] or meta["started"]
        if meta["state"] == "killed" and meta["note"] == "the kernel was reset":
            inferred.append(Restart(after=record.number, time=at, cause="reset", reason=None))
        elif meta["state"] == "died" and meta["died"] is not None:
            reason = meta["died"]["reason"]
            inferred.append(Restart(after=record.number, time=at, cause="died", reason=reason))
    return inferred


def kernel_label(store: RecordStore) -> str:
    """Return how the notes name the kernel on a command line: its name, else its id."""
    return store.meta.get("name") or store.kernel_id


def notebook_cells(store: RecordStore, selection: Selection, max_lines: int) -> Iterator[Cell]:
    """Yield the notebook's cells, one execution's at a time (its code cell, then its note and
    any restart that followed it)."""
    every = store.all()
    chosen = selection.pick(every)
    if not chosen:
        return
    first, last = chosen[0].number, chosen[-1].number
    restarts = [
        (index, restart)
        for index, restart in enumerate(restarts_of(store, every))
        if first <= restart["after"] <= last
    ]
    label = kernel_label(store)
    for position, record in enumerate(chosen):
        upto = chosen[position + 1].number if position + 1 < len(chosen) else last + 1
        following = [(i, r) for i, r in restarts if record.number <= r["after"] < upto]
        yield code_cell(record, max_lines, label)
        note = note_cell(
            record, restart_follows=any(r["after"] == record.number for _, r in following)
        )
        if note is not None:
            yield note
        for index, restart in following:
            yield restart_cell(restart, index)


def origin_cells(origin: RecordStore | None, forked: ForkedFrom, max_lines: int) -> Iterator[Cell]:
    """Yield what a fork's notebook begins with: its origin's cells up to the fork (while the
    origin's records are kept; their ids told apart), then the markdown where the fork begins."""
    if origin is not None and forked["after"] > 0:
        upto = Selection.parse(f"1:{forked['after']}")
        for cell in notebook_cells(origin, upto, max_lines):
            yield {**cell, "id": f"origin-{cell['id']}"}
    yield fork_cell(forked)


def notebook_metadata(
    store: RecordStore, spec: NotebookSpec, selection: Selection, max_lines: int
) -> dict[str, Any]:
    """Return the notebook's metadata: kernelspec, language_info and what was exported."""
    meta = store.meta
    language_info = dict(meta.get("language_info") or {"name": spec.language or ""})
    kernelspec = {"name": spec.name, "display_name": spec.display_name}
    if spec.language is not None:
        kernelspec["language"] = spec.language
    return {
        "kernelspec": kernelspec,
        "language_info": language_info,
        "loomgate": {
            "kernel": {
                "id": store.kernel_id,
                "name": meta.get("name"),
                "cwd": meta.get("cwd"),
                "created": meta.get("created"),
                "ended": meta.get("ended"),
            },
            "exported": time.time(),
            "gateway_version": __version__,
            "selection": selection.described(),
            "max_lines": max_lines,
        },
    }


def notebook_file(data: Mapping[str, Any]) -> str:
    """Return a notebook as Jupyter saves it (indent 1, sorted keys, UTF-8 kept)."""
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
