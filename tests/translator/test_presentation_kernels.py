"""When the gateway stops a kernel nobody holds, as `loomgate kernels`, list_kernels and a kernel's
status say it (from the wire's `stops_at`)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from loomgate.translator.presentation import render_kernels
from loomgate.translator.presentation.kernels import back_to_own_note, render_kernel, stops_note
from tests.support.wire_values import kernel

NOW = 1_800_000_000.0


def clock(at: float) -> str:
    """Return `at` as the notes give it: the local time of day."""
    return time.strftime("%H:%M:%S", time.localtime(at))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"stops_at": None}, None),
        ({}, None),  # a gateway before `stops_at`: nothing said
        (
            {"stops_at": NOW + 599.6},
            f"nobody holds it; stopped at {clock(NOW + 599.6)} (in 10 min 0 s) unless a "
            "conversation takes it back",
        ),
        (
            {"stops_at": NOW + 42},
            f"nobody holds it; stopped at {clock(NOW + 42)} (in 42 s) unless a conversation "
            "takes it back",
        ),
        ({"stops_at": NOW}, "nobody holds it; it is stopped once its running cell ends"),
        ({"stops_at": NOW - 5}, "nobody holds it; it is stopped once its running cell ends"),
    ],
)
def test_stops_note(fields: dict[str, Any], expected: str | None) -> None:
    model = kernel(lifetime="conversation", **fields)
    if not fields:
        del model["stops_at"]  # type: ignore[misc]
    assert stops_note(model, NOW) == expected


def test_the_kernel_table_says_when_each_unheld_kernel_stops() -> None:
    kernels = [
        kernel(id="aaaaaaaa-1", name="lab", last_activity=NOW - 10),
        kernel(
            id="bbbbbbbb-2",
            name=None,
            lifetime="conversation",
            last_activity=NOW - 100,
            stops_at=NOW + 500,
        ),
        kernel(
            id="cccccccc-3",
            name=None,
            lifetime="conversation",
            holders=1,
            held_by=["conversation 1"],
            last_activity=NOW - 3,
        ),
    ]
    lines = render_kernels(kernels, None, "local", now=NOW).split("\n")
    assert lines[-1] == (
        f"bbbbbbbb: nobody holds it; stopped at {clock(NOW + 500)} (in 8 min 20 s) unless a "
        "conversation takes it back"
    )
    assert len(lines) == 6  # the title, the header, three kernels, that one line


def test_a_kernels_status_says_when_it_stops() -> None:
    unheld = kernel(lifetime="conversation", stops_at=time.time() + 300)
    assert (
        render_kernel(unheld, gateway="local")
        .split("\n")[-1]
        .startswith("nobody holds it; stopped at ")
    )
    assert "nobody holds it" not in render_kernel(kernel(), gateway="local")


OWN = kernel(id="bbbbbbbb-2", name=None, lifetime="conversation")


@pytest.mark.parametrize(
    ("own", "note"),
    [
        (
            OWN | {"last_execution": 4},
            "Stopped kernel k5; this conversation is back on its own kernel bbbbbbbb (In [4] "
            "last).",
        ),
        (
            OWN | {"last_execution": None, "executions": 0},
            "Stopped kernel k5; this conversation is back on its own kernel bbbbbbbb (nothing "
            "run in it yet).",
        ),
        (
            OWN | {"alive": False},
            "Stopped kernel k5; this conversation's own kernel bbbbbbbb was stopped too, so the "
            "next run_cell starts a new conversation kernel (its records stay readable: "
            "read_output(kernel='bbbbbbbb', execution=N)).",
        ),
    ],
    ids=["back on its own", "its own has run nothing", "its own is gone too"],
)
def test_stopping_the_current_kernel_says_where_the_conversation_is(own: Any, note: str) -> None:
    assert back_to_own_note(kernel(id="aaaaaaaa-1", name="k5"), own) == note
