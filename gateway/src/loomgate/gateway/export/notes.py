"""The words an exported notebook adds to what the kernel sent: the markdown where the kernel
was reset or its process died, what became of a cell that did not simply end, and the line in
place of a long output's middle."""

from __future__ import annotations

import time

from loomgate.gateway.records.stored_meta import RecordMeta, Restart
from loomgate.shared.wire import ForkedFrom

# What a final state says of a cell in the notes (completed and error say nothing).
ENDED_AS = {
    "interrupted": "was interrupted",
    "killed": "was killed",
    "died": "died with the kernel process",
    "lost": "ended unseen (its end was never seen)",
    "running": "was still running when this notebook was exported",
    "awaiting_input": "was waiting for input when this notebook was exported",
}


def utc(moment: float) -> str:
    """Return a moment as the notes write it: `2026-12-01 12:03:04 UTC`."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(moment))


def restart_text(restart: Restart) -> str:
    """Return the markdown of a reset, a death of the kernel's process, or a rollback."""
    if restart["cause"] == "rollback":
        return (
            f"**The kernel was {restart['reason']}** here, at {utc(restart['time'])}: the cells "
            "below ran on that state (the numbering goes on)."
        )
    if restart["cause"] == "reset":
        what = "**The kernel was reset** here"
    else:
        how = f" ({restart['reason']})" if restart["reason"] else ""
        what = f"**The kernel process died** here{how}"
    return (
        f"{what}, at {utc(restart['time'])}: its variables and imports are gone; the cells "
        "below ran in a fresh process (the numbering goes on)."
    )


def fork_text(origin: ForkedFrom) -> str:
    """Return the markdown where a fork begins: which kernel's state it copied."""
    who = origin["name"] or origin["kernel"]
    state = f"its checkpoint {origin['checkpoint']}" if origin["checkpoint"] else "its state"
    return (
        f"**Forked here** from kernel {who}: {state} after In [{origin['after']}]. The cells "
        "above ran in that kernel; the cells below ran in the fork, numbered from In [1]."
    )


def cell_note(meta: RecordMeta, *, restart_follows: bool) -> str | None:
    """Return the markdown said after a cell that did not simply complete or raise, or whose
    output may be incomplete; None when there is nothing to say.

    A cell killed by a reset or ended by a death says nothing of it when the restart's own
    markdown follows it.
    """
    sentences: list[str] = []
    state = meta["state"]
    label = f"In [{meta['number']}]"
    said_by_restart = restart_follows and state in ("killed", "died")
    if state in ENDED_AS and not said_by_restart:
        note = meta["note"]
        sentences.append(f"**{label} {ENDED_AS[state]}**" + (f": {note}." if note else "."))
    for gap in meta["gaps"]:
        if gap.get("by") == "upstream":
            why = "the upstream server held some back (its IOPub rate limit)"
        elif gap.get("dropped"):
            why = f"the kernel dropped {gap['dropped']:,} of its messages"
        else:
            why = "no gateway listened then"
        sentences.append(
            f"Output of {label} printed between {utc(gap['since'])} and {utc(gap['until'])} "
            f"(after its line {gap['after_line']:,}) may be missing: {why}."
        )
    unstored = meta["unstored"]
    if unstored is not None:
        sentences.append(
            f"Output of {label} from its line {unstored['from_line']:,} on was not stored: "
            f"{unstored['reason']}."
        )
    return " ".join(sentences) or None


def omitted_text(number: int, first: int, last: int, total: int, ref: str) -> str:
    """Return the line that stands for a long output's middle, and how to read it from the
    kernel `ref`."""
    left_out = last - first + 1
    if left_out == 1:
        said = f"1 line of In [{number}] left out here (line {first:,} of {total:,}); read it"
    else:
        said = (
            f"{left_out:,} lines of In [{number}] left out here (lines {first:,} to {last:,} of "
            f"{total:,}); read them"
        )
    return f"… {said} with: loomgate output {number} --kernel {ref} --lines {first}:{last}"
