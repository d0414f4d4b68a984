"""The cells of an exported notebook: a code cell per execution (its source, `In [N]`, outputs
and loomgate metadata), the markdown after a cell that did not simply end, the markdown where
the kernel was reset or its process died, and where a fork begins."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from loomgate.gateway.export.notes import cell_note, fork_text, restart_text
from loomgate.gateway.export.outputs import cell_outputs
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.stored_meta import Restart
from loomgate.shared.wire import ForkedFrom

Cell = dict[str, Any]
PLAIN_ENDS = frozenset({"completed", "error"})


def iso(moment: float) -> str:
    """Return a moment as Jupyter's timing metadata writes it (ISO 8601, UTC)."""
    return datetime.fromtimestamp(moment, timezone.utc).isoformat().replace("+00:00", "Z")


def code_cell(record: ExecutionRecord, max_lines: int, ref: str) -> Cell:
    """Return the code cell of one execution: source, `execution_count` its number, outputs
    as the kernel sent them (at most `max_lines` lines), and under `loomgate` who ran it, when,
    for how long, how it ended and what may be missing."""
    meta = record.meta
    built = cell_outputs(record, max_lines, ref)
    loomgate: dict[str, Any] = {
        "number": record.number,
        "source": meta["source"],
        "client": meta.get("client"),
        "state": meta["state"],
        "started": meta["started"],
        "finished": meta["finished"],
        "elapsed": (meta["finished"] or time.time()) - meta["started"],
        "error": meta["error"],
        "note": meta["note"],
        "died": meta["died"],
        "gaps": list(meta["gaps"]),
        "unstored": meta["unstored"],
        "lines": built.lines,
    }
    if built.omitted is not None:
        omitted = built.omitted
        loomgate["omitted"] = {"first": omitted.first, "last": omitted.last}
    metadata: dict[str, Any] = {}
    if meta["finished"] is not None:
        metadata["execution"] = {
            "iopub.execute_input": iso(meta["started"]),
            "shell.execute_reply": iso(meta["finished"]),
        }
    if meta["state"] not in PLAIN_ENDS:
        metadata["tags"] = [f"loomgate-{meta['state'].replace('_', '-')}"]
    metadata["loomgate"] = loomgate
    return {
        "cell_type": "code",
        "id": f"in-{record.number}",
        "execution_count": record.number,
        "metadata": metadata,
        "source": meta["code"],
        "outputs": built.outputs,
    }


def note_cell(record: ExecutionRecord, *, restart_follows: bool) -> Cell | None:
    """Return the markdown said after a cell that did not simply complete or raise (or whose
    output may be incomplete), or None."""
    text = cell_note(record.meta, restart_follows=restart_follows)
    if text is None:
        return None
    return {
        "cell_type": "markdown",
        "id": f"note-{record.number}",
        "metadata": {"loomgate": {"note_on": record.number}},
        "source": text,
    }


def restart_cell(restart: Restart, index: int) -> Cell:
    """Return the markdown where the kernel's state was lost (`index`: its place among the
    kernel's restarts)."""
    return {
        "cell_type": "markdown",
        "id": f"restart-{index + 1}",
        "metadata": {"loomgate": {"restart": dict(restart)}},
        "source": restart_text(restart),
    }


def fork_cell(origin: ForkedFrom) -> Cell:
    """Return the markdown where a fork begins (after its origin's cells)."""
    return {
        "cell_type": "markdown",
        "id": "forked",
        "metadata": {"loomgate": {"forked_from": dict(origin)}},
        "source": fork_text(origin),
    }
