"""The words an exported notebook adds, table-tested: the markdown of a reset or a death, what is
said after a cell that did not simply end (or whose output may be incomplete), and the line in
place of a long output's middle."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.gateway.export.notes import cell_note, fork_text, omitted_text, restart_text, utc
from loomgate.gateway.records.stored_meta import Restart, new_record_meta
from loomgate.shared.wire import ForkedFrom, Gap, Unstored

MIDNIGHT = 1_796_083_200.0  # 2026-12-01 00:00:00 UTC
LATER = MIDNIGHT + 3 * 3600 + 4 * 60 + 5.75  # 03:04:05.75


def test_a_moment_is_written_in_utc_to_the_second() -> None:
    assert utc(MIDNIGHT) == "2026-12-01 00:00:00 UTC"
    assert utc(LATER) == "2026-12-01 03:04:05 UTC"


@pytest.mark.parametrize(
    ("restart", "text"),
    [
        (
            Restart(after=3, time=LATER, cause="reset", reason=None),
            "**The kernel was reset** here, at 2026-12-01 03:04:05 UTC: its variables and "
            "imports are gone; the cells below ran in a fresh process (the numbering goes on).",
        ),
        (
            Restart(after=3, time=MIDNIGHT, cause="died", reason="exited with code 3"),
            "**The kernel process died** here (exited with code 3), at 2026-12-01 00:00:00 UTC: "
            "its variables and imports are gone; the cells below ran in a fresh process (the "
            "numbering goes on).",
        ),
        (
            Restart(after=3, time=MIDNIGHT, cause="died", reason=None),
            "**The kernel process died** here, at 2026-12-01 00:00:00 UTC: its variables and "
            "imports are gone; the cells below ran in a fresh process (the numbering goes on).",
        ),
        (
            Restart(
                after=7,
                time=LATER,
                cause="rollback",
                reason="rolled back to cp (the state after In [3])",
            ),
            "**The kernel was rolled back to cp (the state after In [3])** here, at 2026-12-01 "
            "03:04:05 UTC: the cells below ran on that state (the numbering goes on).",
        ),
        (
            Restart(after=3, time=MIDNIGHT, cause="died", reason=""),
            "**The kernel process died** here, at 2026-12-01 00:00:00 UTC: its variables and "
            "imports are gone; the cells below ran in a fresh process (the numbering goes on).",
        ),
    ],
)
def test_a_restart_says_what_was_lost_and_when(restart: Restart, text: str) -> None:
    assert restart_text(restart) == text


@pytest.mark.parametrize(
    ("origin", "text"),
    [
        (
            ForkedFrom(kernel="3f2a9c1e-aa", name="main", checkpoint=None, after=4, lacks=[]),
            "**Forked here** from kernel main: its state after In [4]. The cells above ran in "
            "that kernel; the cells below ran in the fork, numbered from In [1].",
        ),
        (
            ForkedFrom(kernel="3f2a9c1e-aa", name=None, checkpoint="clean", after=2, lacks=[]),
            "**Forked here** from kernel 3f2a9c1e-aa: its checkpoint clean after In [2]. The "
            "cells above ran in that kernel; the cells below ran in the fork, numbered from "
            "In [1].",
        ),
    ],
)
def test_a_fork_says_what_it_copied(origin: ForkedFrom, text: str) -> None:
    assert fork_text(origin) == text


GAP = Gap(after_line=12_345, since=MIDNIGHT, until=LATER)
GAP_SAID = (
    "Output of In [4] printed between 2026-12-01 00:00:00 UTC and 2026-12-01 03:04:05 UTC "
    "(after its line 12,345) may be missing: no gateway listened then."
)
DROPPED = Gap(after_line=5_962, since=MIDNIGHT, until=LATER, dropped=9_067, by="kernel")
DROPPED_SAID = (
    "Output of In [4] printed between 2026-12-01 00:00:00 UTC and 2026-12-01 03:04:05 UTC "
    "(after its line 5,962) may be missing: the kernel dropped 9,067 of its messages."
)
HELD = Gap(after_line=1_500, since=MIDNIGHT, until=LATER, dropped=0, by="upstream")
HELD_SAID = (
    "Output of In [4] printed between 2026-12-01 00:00:00 UTC and 2026-12-01 03:04:05 UTC "
    "(after its line 1,500) may be missing: the upstream server held some back (its IOPub rate "
    "limit)."
)
UNSTORED = Unstored(reason="No space left on device", from_line=1_000_001)
UNSTORED_SAID = (
    "Output of In [4] from its line 1,000,001 on was not stored: No space left on device."
)


# (state, note, restart follows, gaps, unstored, the note's text or None)
NOTES: list[tuple[Any, ...]] = [
    ("completed", None, False, [], None, None),
    ("error", "ignored", False, [], None, None),
    ("completed", None, True, [], None, None),
    ("interrupted", None, False, [], None, "**In [4] was interrupted**."),
    ("interrupted", None, True, [], None, "**In [4] was interrupted**."),
    (
        "killed",
        "the kernel was reset",
        False,
        [],
        None,
        "**In [4] was killed**: the kernel was reset.",
    ),
    ("killed", "the kernel was reset", True, [], None, None),
    ("died", None, False, [], None, "**In [4] died with the kernel process**."),
    ("died", "restarted", True, [], None, None),
    (
        "lost",
        "the gateway stopped while this execution ran",
        False,
        [],
        None,
        "**In [4] ended unseen (its end was never seen)**: the gateway stopped while this "
        "execution ran.",
    ),
    ("lost", None, True, [], None, "**In [4] ended unseen (its end was never seen)**."),
    (
        "running",
        None,
        False,
        [],
        None,
        "**In [4] was still running when this notebook was exported**.",
    ),
    (
        "awaiting_input",
        None,
        False,
        [],
        None,
        "**In [4] was waiting for input when this notebook was exported**.",
    ),
    ("completed", None, False, [GAP], None, GAP_SAID),
    ("completed", None, False, [GAP, GAP], None, f"{GAP_SAID} {GAP_SAID}"),
    ("completed", None, False, [DROPPED], None, DROPPED_SAID),
    ("completed", None, False, [HELD], None, HELD_SAID),
    ("completed", None, False, [], UNSTORED, UNSTORED_SAID),
    ("killed", "the kernel was reset", True, [GAP], None, GAP_SAID),
    (
        "interrupted",
        None,
        False,
        [GAP],
        UNSTORED,
        f"**In [4] was interrupted**. {GAP_SAID} {UNSTORED_SAID}",
    ),
]


@pytest.mark.parametrize(("state", "note", "follows", "gaps", "unstored", "said"), NOTES)
def test_the_note_after_a_cell_says_how_it_ended_and_what_may_be_missing(
    state: Any,
    note: str | None,
    follows: bool,
    gaps: list[Gap],
    unstored: Unstored | None,
    said: str | None,
) -> None:
    meta = new_record_meta("k-1", 4, "m", "x", "loomgate", None, MIDNIGHT)
    meta["state"], meta["note"], meta["gaps"], meta["unstored"] = state, note, gaps, unstored
    assert cell_note(meta, restart_follows=follows) == said


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (
            (7, 5001, 995_000, 1_000_000, "demo"),
            "… 990,000 lines of In [7] left out here (lines 5,001 to 995,000 of 1,000,000); "
            "read them with: loomgate output 7 --kernel demo --lines 5001:995000",
        ),
        (
            (2, 3, 3, 4, "k-1"),
            "… 1 line of In [2] left out here (line 3 of 4); read it with: "
            "loomgate output 2 --kernel k-1 --lines 3:3",
        ),
    ],
)
def test_the_omitted_middle_says_how_to_read_it(args: tuple[Any, ...], text: str) -> None:
    assert omitted_text(*args) == text
