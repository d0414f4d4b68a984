"""A cell's life in the execution tracker, against the gateway's own view of IOPub: the busy rule
(`admit`: a cell another client ran counts as running only until the idle the gateway has
received, handled or not; a process that is not ready refuses; a cell just sent is named once it
starts), the repeated early interrupt, an end that a failing note never holds up, a death noted
after the cell it ended, and output after the idle waited for as long as the kernel's path
needs."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.session import Session

from loomgate.gateway.errors import Busy, Conflict, Unavailable
from loomgate.gateway.events import EventBus
from loomgate.gateway.kernels.execution_tracker import (
    OTHER_END_GRACE,
    UNSEEN_START,
    ExecutionTracker,
)
from loomgate.gateway.kernels.kernel_channels import KernelChannels, Message
from loomgate.gateway.kernels.kernel_kind import KernelKind
from loomgate.gateway.kernels.late_output import QUIET, RELAYED_QUIET, LateOutput
from loomgate.gateway.kernels.setup import KernelSetup
from loomgate.gateway.process_end import exit_ending
from loomgate.gateway.records.record import ExecutionRecord
from tests.support.records import kernel_store

PARENT = "cell-from-the-notebook"


def iopub(msg_type: str, parent: str = PARENT, **content: Any) -> Message:
    """Return an IOPub message of the cell sent as `parent` (the notebook's, unless told)."""
    return {
        "header": {"msg_type": msg_type, "msg_id": f"{msg_type}-1"},
        "parent_header": {"msg_id": parent, "msg_type": "execute_request"},
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
        self.sent: list[Message] = []
        self.sent_one = asyncio.Event()

    def _send(self, channel: str, msg: Message) -> None:
        self.sent.append(msg)
        self.sent_one.set()

    def catch_up(self) -> None:
        """Hand on what is held."""
        while self.held:
            self.deliver(self.held.pop(0))


class ReadyProcess:
    """A kernel process that is up, on `channels` (what the tracker asks of a LoomKernel)."""

    def __init__(self) -> None:
        self.phase = "ready"
        self.channels: KernelChannels | None = None
        self.kind = KernelKind("python", "ipython", ".py")
        self.interrupts = 0
        self.interrupted_again = asyncio.Event()

    async def settle(self) -> None:
        """Return at once: no start is in progress."""

    async def signal_interrupt(self) -> None:
        """Count the interrupt."""
        self.interrupts += 1
        if self.interrupts > 1:
            self.interrupted_again.set()

    def sandbox_failure(self, record: object, died: object) -> None:
        """Return no rule: this process has no sandbox."""


@pytest.fixture
async def tracker(tmp_path: Path) -> ExecutionTracker:
    """Return a tracker whose kernel runs the notebook's cell (In [1])."""
    store = kernel_store(tmp_path / "k")
    process = ReadyProcess()
    tracker = ExecutionTracker(
        process, store, KernelSetup(store), EventBus(), logging.getLogger("test")
    )
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
    assert isinstance(tracker.process, ReadyProcess)
    tracker.process.channels = channels
    if busy:
        with pytest.raises(Busy, match="busy running execution 1"):
            await tracker.admit()
        assert tracker.current is not None
    else:
        assert await tracker.admit() is channels
        assert tracker.current is None
        assert tracker.store.get(1) is not None and tracker.store.get(1).state == "completed"


async def test_a_cell_another_client_saw_start_is_running_here_too(
    tracker: ExecutionTracker,
) -> None:
    # That client saw the start (and the cell's first output) on its own socket; ours has
    # received it and not yet handled it.
    tracker.on_iopub(iopub("status", execution_state="idle"))
    assert tracker.current is None
    started = iopub("execute_input", parent="next-cell", code="slow()", execution_count=2)
    process_of(tracker).channels = channels = HeldBack([started])
    channels.deliver = tracker.on_iopub
    with pytest.raises(Busy, match="busy running execution 2"):
        await tracker.admit()
    assert channels.sent == []  # nothing was sent to queue behind it


async def test_another_clients_cell_ending_a_moment_later_is_not_a_refusal(
    tracker: ExecutionTracker,
) -> None:
    # That client saw the idle on its own socket; ours receives it a moment later.
    process_of(tracker).channels = HeldBack([])
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, tracker.on_iopub, iopub("status", execution_state="idle"))
    assert await tracker.admit() is process_of(tracker).channels
    assert tracker.store.get(1) is not None and tracker.store.get(1).state == "completed"


async def test_another_clients_cell_still_running_after_the_grace_is_refused(
    tracker: ExecutionTracker,
) -> None:
    process_of(tracker).channels = HeldBack([])
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(Busy, match="busy running execution 1"):
        await tracker.admit()
    assert loop.time() - started >= OTHER_END_GRACE * 0.9


def process_of(tracker: ExecutionTracker) -> ReadyProcess:
    """Return the stand-in process of `tracker`."""
    assert isinstance(tracker.process, ReadyProcess)
    return tracker.process


@pytest.mark.parametrize("phase", ["starting", "restarting", "dead", "gone"])
async def test_a_kernel_that_is_not_ready_refuses_a_cell(
    tracker: ExecutionTracker, phase: str
) -> None:
    process_of(tracker).phase = phase
    process_of(tracker).channels = HeldBack([])
    with pytest.raises(Unavailable, match=f"the kernel is {phase}; try again when it is ready"):
        await tracker.admit()


async def sent_unseen(
    tracker: ExecutionTracker, code: str
) -> tuple[HeldBack, asyncio.Future[ExecutionRecord]]:
    """Submit `code` once the notebook's cell has ended; return the channels and the submission
    once the cell is sent, not yet seen starting."""
    channels = HeldBack([])
    process_of(tracker).channels = channels
    tracker.on_iopub(iopub("status", execution_state="idle"))  # the notebook's cell ends
    submitted = asyncio.ensure_future(tracker.submit(code, client="cli"))
    await channels.sent_one.wait()
    return channels, submitted


async def test_a_cell_just_sent_is_named_by_the_refusal_once_it_starts(
    tracker: ExecutionTracker,
) -> None:
    channels, first = await sent_unseen(tracker, "slow()")
    second = asyncio.ensure_future(tracker.admit())
    await asyncio.sleep(0)  # the second admit is now waiting for the first cell to start
    assert not second.done()
    sent = channels.sent[0]["header"]["msg_id"]
    tracker.on_iopub(iopub("execute_input", parent=sent, code="slow()", execution_count=2))
    record = await first
    assert (record.number, record.meta["client"]) == (2, "cli")
    with pytest.raises(Busy, match="busy running execution 2"):
        await second


async def test_an_early_interrupt_is_repeated_while_the_cell_runs_on(
    tracker: ExecutionTracker,
) -> None:
    process_of(tracker).channels = HeldBack([])
    record = await tracker.interrupt()
    assert record is tracker.current and process_of(tracker).interrupts == 1
    await asyncio.wait_for(process_of(tracker).interrupted_again.wait(), 5)
    tracker.on_iopub(iopub("error", ename="KeyboardInterrupt", evalue="", traceback=[]))
    tracker.on_iopub(iopub("status", execution_state="idle"))
    assert record.state == "interrupted"


async def test_nothing_running_cannot_be_interrupted(tracker: ExecutionTracker) -> None:
    tracker.on_iopub(iopub("status", execution_state="idle"))
    with pytest.raises(Conflict, match="nothing is running"):
        await tracker.interrupt()
    assert process_of(tracker).interrupts == 0


async def test_a_cell_ends_when_reading_its_sandbox_rule_fails(
    tracker: ExecutionTracker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(record: object, died: object) -> None:
        raise OSError("a rule that cannot be read")

    monkeypatch.setattr(tracker.process, "sandbox_failure", broken)
    record = tracker.current
    assert record is not None
    tracker.on_iopub(iopub("status", execution_state="idle"))
    assert record.state == "completed"
    assert tracker.current is None
    assert "execution 1's sandbox rule not read" in caplog.text


async def test_a_death_is_noted_after_the_cell_it_ended_even_one_never_seen_starting(
    tracker: ExecutionTracker,
) -> None:
    _, sent = await sent_unseen(tracker, "import os; os._exit(3)")
    tracker.process_died(exit_ending(3), restarting=True)
    record = await sent
    assert (record.number, record.state) == (2, "died")
    [restart] = tracker.store.meta["restarts"]
    assert (restart["after"], restart["cause"]) == (2, "died")
    assert restart["reason"] == "the kernel process exited with code 3"
    tracker.process_restarted()
    assert record.meta["died"] == {"reason": restart["reason"], "cause": "exit", "restarted": True}
    assert record.meta["note"] == (
        f"{UNSEEN_START}; the kernel was restarted; its state is gone"  # it may not have begun
    )


@pytest.mark.parametrize(("relayed", "quiet"), [(False, QUIET), (True, RELAYED_QUIET)])
async def test_a_cell_whose_output_comes_late_ends_once_quiet_for_its_path(
    tmp_path: Path, relayed: bool, quiet: float
) -> None:
    store = kernel_store(tmp_path / "k")
    record = store.new_record(number=1, msg_id="m", code="console.log(1)", source="loomgate")
    late = LateOutput(store, logging.getLogger("test"))
    ended = asyncio.Event()
    loop = asyncio.get_running_loop()
    idle = loop.time()
    late.settle(record, ended.set, relayed=relayed)
    await ended.wait()
    assert quiet <= loop.time() - idle < quiet + 0.35
