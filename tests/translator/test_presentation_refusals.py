"""Refusals as the model and a person read them, table-driven: a busy kernel, an answer to a cell
that waits for nothing, a dismissed input dialog."""

from __future__ import annotations

import pytest

from loomgate.translator.presentation import (
    Audience,
    busy_refusal,
    dismissed_dialog_note,
    not_waiting_for_input,
    unknown_kernel_refusal,
)

BUSY = [
    (
        12,
        "model",
        None,
        "The kernel is busy running In [12]; the cell was not run. Use wait(execution=12) to "
        "wait for it or interrupt() to stop it.",
    ),
    (
        12,
        "person",
        None,
        "the kernel is busy running In [12]; wait for it or run `loomgate interrupt`",
    ),
    (
        None,
        "model",
        None,
        "The kernel is busy starting another cell; the cell was not run. Try again in a moment.",
    ),
    (None, "person", None, "the kernel is busy starting another cell; try again"),
    (
        None,
        "model",
        ["startup.py", "inspectors.py"],
        "The kernel is still running its setup (startup.py, inspectors.py); the cell was not "
        "run. Try again in a moment.",
    ),
    (
        3,
        "person",
        ["startup.py"],
        "the kernel is still running its setup (startup.py); try again in a moment",
    ),
    (
        12,
        "person",
        [],
        "the kernel is busy running In [12]; wait for it or run `loomgate interrupt`",
    ),
]


@pytest.mark.parametrize(("running", "audience", "setup", "expected"), BUSY)
def test_a_busy_kernel_says_what_it_runs(
    running: int | None, audience: Audience, setup: list[str] | None, expected: str
) -> None:
    assert busy_refusal(running, audience, setup) == expected


def test_a_busy_refusal_without_setup_names_the_running_cell() -> None:
    assert busy_refusal(4, "model").startswith("The kernel is busy running In [4];")


NOT_WAITING = [
    (None, None, "No cell is waiting for input."),
    (None, "completed", "No cell is waiting for input."),
    (3, "running", "In [3] is not waiting for input; it is still running."),
    (3, "awaiting_input", "In [3] is not waiting for input; it is waiting for input."),
    (3, "completed", "In [3] is not waiting for input; it completed."),
    (3, "error", "In [3] is not waiting for input; it ended with an error."),
    (3, "interrupted", "In [3] is not waiting for input; it was interrupted."),
    (3, "killed", "In [3] is not waiting for input; it was killed."),
    (3, "died", "In [3] is not waiting for input; it died with its kernel."),
    (3, "lost", "In [3] is not waiting for input; it was lost."),
    (3, "queued", "In [3] is not waiting for input; it is queued."),
]


@pytest.mark.parametrize(("number", "state", "expected"), NOT_WAITING)
def test_an_answer_to_a_cell_that_waits_for_nothing(
    number: int | None, state: str | None, expected: str
) -> None:
    assert not_waiting_for_input(number, state) == expected


def test_a_dismissed_dialog_leaves_the_cell_waiting() -> None:
    assert dismissed_dialog_note(7) == (
        "The input dialog was dismissed; In [7] still waits for input. "
        'Answer with send_input(value="…", execution=7) or interrupt().'
    )


UNKNOWN = [
    (
        "lab",
        "no kernel named 'lab' on the local gateway. connect(kernel=\"lab\") starts a persistent "
        "kernel by that name; list_kernels() shows the running ones.",
    ),
    (
        "work/analysis.ipynb",
        "no kernel named 'work/analysis.ipynb' on the local gateway; list_kernels() shows the "
        "kernels and the notebooks they serve.",
    ),
    (
        "work/console-1",
        "no kernel named 'work/console-1' on the local gateway; list_kernels() shows the "
        "kernels and the notebooks they serve.",
    ),
    (
        "analysis.ipynb",
        "no kernel named 'analysis.ipynb' on the local gateway; list_kernels() shows the "
        "kernels and the notebooks they serve.",
    ),
]


@pytest.mark.parametrize(
    ("ref", "expected"), UNKNOWN, ids=["name", "notebook path", "console path", "notebook"]
)
def test_a_cell_for_an_unknown_kernel_says_how_to_start_or_find_one(
    ref: str, expected: str
) -> None:
    """A name is one connect starts; a notebook path is only ever found, never started."""
    assert unknown_kernel_refusal(f"no kernel named {ref!r} on the local gateway", ref) == expected
