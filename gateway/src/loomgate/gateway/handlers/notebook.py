"""The notebook endpoint: a kernel's records (live or gone) as an nbformat 4 notebook, of the
executions and the people asked for."""

from __future__ import annotations

import asyncio
import inspect

from jupyter_client.kernelspec import KernelSpecManager

from loomgate.gateway.errors import BadRequest
from loomgate.gateway.export.cells import Cell
from loomgate.gateway.export.notebook import (
    DEFAULT_MAX_LINES,
    NotebookSpec,
    notebook_cells,
    notebook_metadata,
    origin_cells,
)
from loomgate.gateway.export.selection import Selection, SelectionError
from loomgate.gateway.handlers.answers import Answer
from loomgate.gateway.handlers.call import Call
from loomgate.gateway.handlers.kernels import note_sessions
from loomgate.gateway.records.store import RecordStore
from loomgate.shared import wire

CELLS_PER_TURN = 100  # cells built before the loop serves others (a long export holds no one)


def notebook_spec(call: Call, store: RecordStore) -> NotebookSpec:
    """Return the kernelspec the notebook names: the kernel's, with the display name and
    language its spec gives here (where the spec is not on this machine, as the kernel told)."""
    name = store.meta.get("kernel_spec") or ""
    language_info = store.meta.get("language_info") or {}
    told = language_info.get("name")
    language = told if isinstance(told, str) else None
    manager = call.settings.get("kernel_spec_manager")
    # An upstream's spec manager asks the upstream (a coroutine): its kernel told enough.
    if isinstance(manager, KernelSpecManager) and not inspect.iscoroutinefunction(
        manager.get_kernel_spec
    ):
        try:
            spec = manager.get_kernel_spec(name)
        except Exception:  # a spec removed since the kernel started: named as it was
            return NotebookSpec(name=name, display_name=name, language=language)
        return NotebookSpec(
            name=name, display_name=spec.display_name or name, language=spec.language or language
        )
    return NotebookSpec(name=name, display_name=name, language=language)


async def export_notebook(call: Call) -> Answer:
    """GET kernels/{ref}/notebook: the kernel's executions as a notebook (`executions` a:b,
    `source`, `client`, `max_lines` per cell)."""
    await note_sessions(call)  # `ref` may be a notebook JupyterLab just opened
    store = call.registry.resolve_store(call.path["ref"])
    try:
        selection = Selection.parse(
            call.text_arg("executions"), call.text_arg("source"), call.text_arg("client")
        )
    except SelectionError as e:
        raise BadRequest(str(e)) from None
    max_lines = call.int_arg("max_lines", DEFAULT_MAX_LINES, lo=2)
    cells: list[Cell] = []
    forked = store.meta.get("forked_from")
    if forked is not None and selection == Selection.parse(None):  # the fork's whole story
        cells += origin_cells(call.registry.stores.get(forked["kernel"]), forked, max_lines)
    for cell in notebook_cells(store, selection, max_lines):
        cells.append(cell)
        if len(cells) % CELLS_PER_TURN == 0:
            await asyncio.sleep(0)
    metadata = notebook_metadata(store, notebook_spec(call, store), selection, max_lines)
    return 200, wire.Notebook(nbformat=4, nbformat_minor=5, metadata=metadata, cells=cells)
