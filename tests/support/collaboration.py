"""A second browser on a notebook: a Y client (pycrdt + jupyter_ydoc) joined to the notebook's
jupyter-collaboration room over its websocket, as JupyterLab's frontend joins it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
from jupyter_ydoc import YNotebook
from pycrdt import Provider, TransactionEvent
from websockets.asyncio.client import ClientConnection, connect

from tests.support.jupyter_lab import JupyterServerProcess

WAIT_TIMEOUT = 30.0


class WebsocketChannel:
    """pycrdt's Channel over a `websockets` connection (binary Y sync messages)."""

    def __init__(self, websocket: ClientConnection, path: str) -> None:
        self.websocket = websocket
        self._path = path

    @property
    def path(self) -> str:
        """Return the room this channel joins."""
        return self._path

    def __aiter__(self) -> WebsocketChannel:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self.recv()
        except Exception:
            raise StopAsyncIteration from None

    async def send(self, message: bytes) -> None:
        """Send one Y message."""
        await self.websocket.send(message)

    async def recv(self) -> bytes:
        """Return the next Y message."""
        message = await self.websocket.recv()
        return message if isinstance(message, bytes) else message.encode()


class NotebookPeer:
    """The shared notebook as one collaborator sees it, with every change it receives counted."""

    def __init__(self, notebook: YNotebook) -> None:
        self.notebook = notebook
        self.updates = 0
        self._changed = asyncio.Event()
        notebook.ydoc.observe(self._on_update)

    def _on_update(self, _event: TransactionEvent) -> None:
        self.updates += 1
        self._changed.set()

    def cells(self) -> list[dict[str, Any]]:
        """Return the notebook's cells as nbformat dicts."""
        cells: list[dict[str, Any]] = self.notebook.get()["cells"]
        return cells

    async def wait_for(
        self, check: Callable[[list[dict[str, Any]]], bool], what: str
    ) -> list[dict[str, Any]]:
        """Return the cells once `check` accepts them (AssertionError naming `what` after
        WAIT_TIMEOUT)."""
        deadline = time.monotonic() + WAIT_TIMEOUT
        while not check(cells := self.cells()):
            left = deadline - time.monotonic()
            assert left > 0, f"the shared notebook never showed {what}: {cells}"
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)
        return cells


@contextlib.asynccontextmanager
async def joined(lab: JupyterServerProcess, path: str) -> AsyncIterator[NotebookPeer]:
    """Yield a peer joined to the collaboration room of notebook `path` (which must exist),
    synced with the server's document; it leaves the room at the end."""
    async with httpx.AsyncClient(base_url=lab.url, headers=lab.headers, timeout=30) as http:
        r = await http.put(
            f"/api/collaboration/session/{path}", json={"format": "json", "type": "notebook"}
        )
        assert r.status_code in (200, 201), r.text
        session = r.json()
    room = f"{session['format']}:{session['type']}:{session['fileId']}"
    url = (
        f"ws://127.0.0.1:{lab.port}/api/collaboration/room/{room}?sessionId={session['sessionId']}"
    )
    notebook = YNotebook()
    peer = NotebookPeer(notebook)
    websocket = await connect(url, additional_headers=lab.headers, max_size=None)
    async with websocket, Provider(notebook.ydoc, WebsocketChannel(websocket, room)) as provider:
        await asyncio.wait_for(provider.synced.wait(), WAIT_TIMEOUT)
        await peer.wait_for(bool, "the notebook's cells")
        yield peer
