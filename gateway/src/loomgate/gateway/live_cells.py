"""The agent's cells, live in the notebooks the person has open: every cell loomgate runs on the
kernel of a notebook open in jupyter-collaboration becomes a code cell at the end of that
notebook's shared document, its outputs filled in as the event bus reports them.

Fed by the event bus only (execution and output events), for the kernels that serve a notebook:
the others publish nothing for it. Only jupyter-collaboration's documented calls are used:
`get_document(…, copy=False)` for a room that is open (none is created), and jupyter_ydoc's
notebook model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loomgate.gateway.events import EventBus, Listener, Published
from loomgate.gateway.export.outputs import cell_outputs
from loomgate.gateway.records.store import RecordStore
from loomgate.shared.wire import FINAL_STATES, Execution

if TYPE_CHECKING:
    from jupyter_ydoc import YNotebook

    from loomgate.gateway.shared_cell import SharedCell

# Lines of a cell's output kept in the notebook (head and tail); the rest is in its record.
LIVE_OUTPUT_LINES = 1000
# The least time between two updates of one cell's outputs: each is one Y transaction, sent to
# every browser that has the notebook open.
UPDATE_INTERVAL = 0.1
NOTEBOOK_SUFFIX = ".ipynb"

# The live shared notebook at a path, or None when no room has it open.
Documents = Callable[[str], Awaitable["YNotebook | None"]]
# The Jupyter sessions (notebooks, consoles) that use a kernel now, by path.
SessionPaths = Callable[[str], Awaitable[list[str]]]


@dataclass
class LiveCell:
    """One execution's cells, one per open notebook of its kernel; `opening` until they exist."""

    kernel_id: str
    number: int
    cells: list[SharedCell] = field(default_factory=list)
    opening: bool = True
    update: asyncio.TimerHandle | None = None
    last_update: float = 0.0


class LiveCells:
    """Writes the agent's executions into the shared notebooks of their kernels."""

    def __init__(
        self,
        stores: Mapping[str, RecordStore],
        documents: Documents,
        session_paths: SessionPaths,
        log: logging.Logger,
    ) -> None:
        self.stores = stores
        self.documents = documents
        self.session_paths = session_paths
        self.log = log
        self.listener = Listener(wants=self.serves_notebook, callback=self.on_event)
        self._live: dict[tuple[str, int], LiveCell] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def attach(self, events: EventBus) -> None:
        """Start following the executions the bus publishes."""
        events.listen(self.listener)

    def serves_notebook(self, kernel_id: str) -> bool:
        """Return whether the kernel serves a notebook (as its records know): only those kernels
        publish execution and output events for live cells."""
        store = self.stores.get(kernel_id)
        return store is not None and any(
            path.endswith(NOTEBOOK_SUFFIX) for path in store.meta.get("paths", [])
        )

    def on_event(self, event: Published) -> None:
        """Follow an execution of loomgate's from its start (a new cell) to its end; never
        raise into the publisher."""
        try:
            if event["event"] == "execution":
                self._on_execution(event["kernel_id"], event["execution"])
            elif event["event"] == "output":
                live = self._live.get((event["kernel_id"], event["number"]))
                if live is not None:
                    self._schedule(live)
        except Exception:
            self.log.exception("loomgate: a live cell could not be updated")

    def _on_execution(self, kernel_id: str, execution: Execution) -> None:
        key = (kernel_id, execution["number"])
        live = self._live.get(key)
        final = execution["state"] in FINAL_STATES
        if live is None:
            if execution["source"] != "loomgate" or final:
                return  # the notebook's own cells are in it already
            live = self._live[key] = LiveCell(kernel_id, execution["number"])
            self._spawn(self._open(live, execution))
            return
        self._schedule(live)

    async def _open(self, live: LiveCell, execution: Execution) -> None:
        """Append the execution's cell to every open notebook of its kernel."""
        from loomgate.gateway.shared_cell import AGENT_TAG, SharedCell

        key = (live.kernel_id, live.number)
        try:
            for path in await self.session_paths(live.kernel_id):
                if not path.endswith(NOTEBOOK_SUFFIX):
                    continue
                notebook = await self.documents(path)
                if notebook is None:
                    continue  # not open in a browser: the file stays as it is
                metadata = {
                    "tags": [AGENT_TAG],
                    "loomgate": {
                        "agent": True,
                        "number": live.number,
                        "client": execution["client"],
                        "kernel_id": live.kernel_id,
                        "state": "running",
                    },
                }
                cell_id = f"loomgate-{live.kernel_id[:8]}-{live.number}"
                cell = SharedCell.append(
                    notebook, cell_id, execution["code"], live.number, metadata
                )
                live.cells.append(cell)
        except Exception:
            self.log.exception("loomgate: execution %s could not be shown live", live.number)
        live.opening = False
        if not live.cells:
            self._live.pop(key, None)
            return
        store = self.stores.get(live.kernel_id)
        record = store.get(live.number) if store is not None else None
        if record is None or record.final or record.log("combined").total:
            self._schedule(live)  # what arrived while the cells were being added

    def _schedule(self, live: LiveCell) -> None:
        """Update the cells soon: at once after a quiet UPDATE_INTERVAL, else at its end."""
        if live.opening or live.update is not None:
            return
        loop = asyncio.get_running_loop()
        wait = max(0.0, live.last_update + UPDATE_INTERVAL - loop.time())
        live.update = loop.call_later(wait, self._update, live)

    def _update(self, live: LiveCell) -> None:
        """Write the record's outputs so far into each cell (and its end, once it has ended)."""
        live.update = None
        live.last_update = asyncio.get_running_loop().time()
        store = self.stores.get(live.kernel_id)
        record = store.get(live.number) if store is not None else None
        if record is None:
            self._live.pop((live.kernel_id, live.number), None)
            return
        ended = record.final
        try:
            label = next(iter(store.meta.get("paths", [])), live.kernel_id) if store else ""
            outputs = cell_outputs(record, LIVE_OUTPUT_LINES, label).outputs
            state = record.state if ended else None
            live.cells = [cell for cell in live.cells if cell.update(outputs, state=state)]
        except Exception:
            self.log.exception("loomgate: execution %s could not be shown live", live.number)
            live.cells = []
        if ended or not live.cells:
            self._live.pop((live.kernel_id, live.number), None)

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            with contextlib.suppress(asyncio.CancelledError):
                await work

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def notebook_paths(session_manager: Any, kernel_id: str) -> list[str]:
    """Return the paths of the Jupyter sessions that use `kernel_id` (sessions API order)."""
    sessions = await session_manager.list_sessions()
    return [
        str(session["path"])
        for session in sessions
        if (session.get("kernel") or {}).get("id") == kernel_id and session.get("path")
    ]


def shared_documents(collaboration: Any) -> Documents:
    """Return the open shared notebooks of jupyter-collaboration's server extension (the app in
    the server's settings as `jupyter_server_ydoc`), by path; a notebook no room has open is
    None (none is created)."""
    from jupyter_ydoc import YNotebook

    async def document(path: str) -> YNotebook | None:
        found = await collaboration.get_document(
            path=path, content_type="notebook", file_format="json", copy=False
        )
        return found if isinstance(found, YNotebook) else None

    return document
