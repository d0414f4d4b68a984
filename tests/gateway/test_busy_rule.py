"""The busy rule against the gateway's own view of IOPub: a cell another client ran counts as
running only until the idle the gateway has received, handled or not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jupyter_client.session import Session

from loomgate.gateway.errors import Busy
from loomgate.gateway.events import EventBus
from loomgate.gateway.kernels.channels import KernelChannels, Message
from loomgate.gateway.kernels.executions import ExecutionTracker
from loomgate.gateway.records.store import RecordStore

PARENT = "cell-from-the-notebook"


def iopub(msg_type: str, **content: Any) -> Message:
    """Return an IOPub message of the notebook's cell."""
    return {
        "header": {"msg_type": msg_type, "msg_id": f"{msg_type}-1"},
        "parent_header": {"msg_id": PARENT, "msg_type": "execute_request"},
        "metadata": {},
        "content": content,
    }


class HeldBack(KernelChannels):
    """A transport holding messages it has received but not yet handed on (as a ZMQ socket
    does between turns of the event loop)."""

    def __init__(self, held: list[Message]) -> None:
        super().__init__(Session(), on_iopub=lambda msg: None, on_stdin=lambda msg: None)
        self.held = held
        self.deliver = lambda msg: None

    def catch_up(self) -> None:
        """Hand on what is held."""
        while self.held:
            self.deliver(self.held.pop(0))


@pytest.fixture
async def tracker(tmp_path: Path) -> ExecutionTracker:
    """Return a tracker whose kernel runs the notebook's cell (In [1])."""
    store = RecordStore.create(
        tmp_path / "k",
        {
            "id": "k",
            "name": None,
            "lifetime": "persistent",
            "kernel_spec": None,
            "cwd": None,
            "attached": None,
        },
    )
    tracker = ExecutionTracker(store, EventBus())
    tracker.on_iopub(iopub("status", execution_state="busy"))
    tracker.on_iopub(iopub("execute_input", code="slow()", execution_count=1))
    assert tracker.current is not None
    return tracker


@pytest.mark.parametrize(
    ("held", "busy"),
    [([iopub("status", execution_state="idle")], False), ([], True)],
    ids=["idle-received", "still-running"],
)
async def test_a_cell_is_refused_only_while_the_kernel_runs_another(
    tracker: ExecutionTracker, held: list[Message], busy: bool
) -> None:
    channels = HeldBack(held)
    channels.deliver = tracker.on_iopub
    tracker.channels = channels
    if busy:
        with pytest.raises(Busy, match="busy running execution 1"):
            await tracker.refuse_if_busy(1.0)
        assert tracker.current is not None
    else:
        await tracker.refuse_if_busy(1.0)
        assert tracker.current is None
        assert tracker.store.get(1) is not None and tracker.store.get(1).state == "completed"
