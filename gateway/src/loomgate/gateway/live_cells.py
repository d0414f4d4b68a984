"""The agent's cells, live in the notebooks the person has open: every cell loomgate runs on the
kernel of a notebook open in jupyter-collaboration becomes a code cell at the end of that
notebook's shared document, its outputs filled in as the event bus reports them, also output
that arrives after the cell ended (a thread it started, printing on).

Fed by the event bus only (execution and output events), for the kernels that serve a notebook:
the others publish nothing for it. Only jupyter-collaboration's documented calls are used:
`get_document(…, copy=False)` for a room that is open (none is created), and jupyter_ydoc's
notebook model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loomgate.gateway.events import EventBus, Listener, Published
from loomgate.gateway.export.outputs import cell_outputs
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.shared.wire import FINAL_STATES, Execution

if TYPE_CHECKING:
    from jupyter_ydoc import YNotebook

    from loomgate.gateway.shared_cell import SharedCell

Output = dict[str, Any]
# Lines of a cell's output kept in the notebook (head and tail); the rest is in its record.
LIVE_OUTPUT_LINES = 1000
# The least time between two updates of one cell's outputs: each is one Y transaction, sent to
# every browser that has the notebook open.
UPDATE_INTERVAL = 0.1
# Ended cells per kernel still written when late output reaches their record: as many as the
# execution tracker still matches late output to.
ENDED_CELLS = 16
# Kernel phases after which no earlier cell's thread can print any more.
CELLS_GONE = frozenset({"restarting", "dead", "stopped"})
NOTEBOOK_SUFFIX = ".ipynb"

# The live shared notebook at a path, or None when no room has it open.
Documents = Callable[[str], Awaitable["YNotebook | None"]]
# The Jupyter sessions (notebooks, consoles) that use a kernel now, by path.
SessionPaths = Callable[[str], Awaitable[list[str]]]


@dataclass
class LiveCell:
    """One execution's cells, one per open notebook of its kernel; `opening` until they exist,
    `ended` once their end is written (then only late output changes them)."""

    kernel_id: str
    number: int
    cells: list[SharedCell] = field(default_factory=list)
    opening: bool = True
    ended: bool = False
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
        self._live: dict[tuple[str, int], LiveCell] = {}
        self._ended: dict[str, OrderedDict[int, LiveCell]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def attach(self, events: EventBus) -> None:
        """Start following the executions the bus publishes."""
        events.listen(Listener(wants=self.serves_notebook, callback=self.on_event))

    def serves_notebook(self, kernel_id: str) -> bool:
        """Return whether the kernel serves a notebook (as its records know): only those kernels
        publish execution and output events for live cells."""
        store = self.stores.get(kernel_id)
        return store is not None and any(
            path.endswith(NOTEBOOK_SUFFIX) for path in store.meta.get("paths", [])
        )

    def on_event(self, event: Published) -> None:
        """Follow an execution of loomgate's from its start (a new cell) to its end, and its
        late output after; never raise into the publisher."""
        try:
            if event["event"] == "execution":
                self._on_execution(event["kernel_id"], event["execution"])
            elif event["event"] == "output":
                live = self._following(event["kernel_id"], event["number"])
                if live is not None:
                    self._schedule(live)
            elif event["event"] == "kernel" and event["phase"] in CELLS_GONE:
                self._ended.pop(event["kernel_id"], None)
        except Exception:
            self.log.exception("loomgate: a live cell could not be updated")

    def _following(self, kernel_id: str, number: int) -> LiveCell | None:
        """Return the cells of execution `number`, running or ended, if they are followed."""
        live = self._live.get((kernel_id, number))
        if live is None and kernel_id in self._ended:
            live = self._ended[kernel_id].get(number)
        return live

    def _on_execution(self, kernel_id: str, execution: Execution) -> None:
        key = (kernel_id, execution["number"])
        live = self._live.get(key)
        final = execution["state"] in FINAL_STATES
        if live is None:
            if execution["source"] != "loomgate" or final:
                return  # the notebook's own cells are in it already
            live = self._live[key] = LiveCell(kernel_id, execution["number"])
            # Added a moment later: a short cell is then added whole, in one transaction, after
            # its reply has gone out.
            loop = asyncio.get_running_loop()
            loop.call_later(UPDATE_INTERVAL, lambda: self._spawn(self._open(live, execution)))
            return
        self._schedule(live)

    async def _open(self, live: LiveCell, execution: Execution) -> None:
        """Append the execution's cell to every open notebook of its kernel."""
        from loomgate.gateway.shared_cell import AGENT_TAG, SharedCell

        key = (live.kernel_id, live.number)
        record = None
        try:
            notebooks = []
            for path in await self.session_paths(live.kernel_id):
                if path.endswith(NOTEBOOK_SUFFIX):
                    notebook = await self.documents(path)
                    if notebook is not None:  # else not open in a browser: the file stays as it is
                        notebooks.append(notebook)
            record, outputs = self._outputs(live)
            if record is not None and notebooks:
                state = record.state if record.final else None
                metadata = {
                    "tags": [AGENT_TAG],
                    "loomgate": {
                        "agent": True,
                        "number": live.number,
                        "client": execution["client"],
                        "kernel_id": live.kernel_id,
                        "state": state or "running",
                    },
                }
                cell_id = f"loomgate-{live.kernel_id[:8]}-{live.number}"
                live.cells = [
                    SharedCell.append(
                        notebook,
                        cell_id,
                        execution["code"],
                        live.number,
                        metadata,
                        outputs,
                        ended=state is not None,
                    )
                    for notebook in notebooks
                ]
        except Exception:
            self.log.exception("loomgate: execution %s could not be shown live", live.number)
            live.cells = []
        live.opening = False
        if not live.cells or record is None:
            self._live.pop(key, None)  # nowhere to add it
        elif record.final:
            self._retire(live)  # added whole

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
        try:
            record, outputs = self._outputs(live)
            if record is None:
                live.cells = []
                self._retire(live)
                return
            ended = record.final
            state = record.state if ended and not live.ended else None
            live.cells = [cell for cell in live.cells if cell.update(outputs, state=state)]
        except Exception:
            self.log.exception("loomgate: execution %s could not be shown live", live.number)
            live.cells, ended = [], True
        if ended or not live.cells:
            self._retire(live)

    def _retire(self, live: LiveCell) -> None:
        """Stop following an execution that ended (or whose cells are gone); keep its cells for
        late output, the kernel's last ENDED_CELLS."""
        self._live.pop((live.kernel_id, live.number), None)
        ended = self._ended.setdefault(live.kernel_id, OrderedDict())
        if not live.cells:
            ended.pop(live.number, None)
        elif not live.ended:
            live.ended = True
            ended[live.number] = live
            while len(ended) > ENDED_CELLS:
                ended.popitem(last=False)
        if not ended:
            self._ended.pop(live.kernel_id, None)

    def _outputs(self, live: LiveCell) -> tuple[ExecutionRecord | None, list[Output]]:
        """Return the execution's record and its outputs so far (head and tail)."""
        store = self.stores.get(live.kernel_id)
        record = store.get(live.number) if store is not None else None
        if store is None or record is None:
            return None, []
        label = next(iter(store.meta.get("paths", [])), live.kernel_id)
        return record, cell_outputs(record, LIVE_OUTPUT_LINES, label).outputs

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
