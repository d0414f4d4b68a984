"""What a kernel's event stream says it runs, kept from its events in order."""

from __future__ import annotations

import pytest

from loomgate.shared.events import (
    Event,
    ExecutionEvent,
    HelloEvent,
    KernelEvent,
    KernelPhase,
    OutputEvent,
)
from loomgate.shared.wire import ExecutionState
from loomgate.translator.client.kernel_activity import KernelActivity
from tests.support.wire_values import execution, kernel


def hello(current: int | None) -> Event:
    """Return the first event of a stream on a kernel running `current` (None: idle)."""
    return HelloEvent(event="hello", kernel=kernel(current_execution=current))


def started(number: int, state: ExecutionState = "running") -> Event:
    """Return the event of execution `number` reaching `state`."""
    summary = execution(number=number, state=state)
    return ExecutionEvent(event="execution", id=1, kernel_id="k", time=0.0, execution=summary)


def output(number: int, last_line: str) -> Event:
    """Return an output event of execution `number` ending in `last_line`."""
    return OutputEvent(
        event="output", id=1, kernel_id="k", time=0.0, number=number, lines=1, last_line=last_line
    )


def kernel_phase(phase: KernelPhase) -> Event:
    """Return a kernel event of `phase` (ready, restarting, dead, stopped)."""
    return KernelEvent(event="kernel", id=1, kernel_id="k", time=0.0, phase=phase, kernel=kernel())


@pytest.mark.parametrize(
    ("events", "current", "last_lines"),
    [
        ([], None, {}),
        ([hello(None)], None, {}),
        ([hello(3)], 3, {3: ""}),
        ([hello(None), started(4), output(4, "step 1")], 4, {4: "step 1"}),
        ([hello(None), started(4), output(4, "a"), output(4, "b")], 4, {4: "b"}),
        ([hello(None), started(4), output(4, "a"), started(4, "awaiting_input")], 4, {4: "a"}),
        ([hello(None), started(4), output(4, "a"), started(4, "completed")], None, {4: ""}),
        ([hello(None), started(4), started(4, "error"), started(5)], 5, {4: "", 5: ""}),
        ([hello(None), output(9, "not running")], None, {9: ""}),
        ([hello(None), started(4), output(4, "a"), hello(4)], 4, {4: "a"}),
        ([hello(None), started(4), output(4, "a"), hello(None)], None, {4: ""}),
        ([hello(None), started(4), output(4, "a"), kernel_phase("restarting")], None, {4: ""}),
        ([hello(None), started(4), output(4, "a"), kernel_phase("ready")], 4, {4: "a"}),
    ],
    ids=[
        "nothing-seen",
        "idle",
        "running-at-hello",
        "started-and-printed",
        "the-last-line",
        "waiting-for-input",
        "ended",
        "the-next-cell",
        "output-of-no-running-cell",
        "a-reconnect-keeps-the-running-line",
        "a-reconnect-to-an-idle-kernel",
        "restarting",
        "ready",
    ],
)
def test_the_activity_follows_the_events(
    events: list[Event], current: int | None, last_lines: dict[int, str]
) -> None:
    activity = KernelActivity()
    for event in events:
        activity(event)
    assert activity.current == current
    assert {number: activity.last_line(number) for number in last_lines} == last_lines
