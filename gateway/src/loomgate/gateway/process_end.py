"""How a kernel's process ended: a cause the code acts on, and the sentence said of it."""

from __future__ import annotations

import signal
from dataclasses import dataclass

from loomgate.shared.wire import Death, DeathCause


@dataclass(frozen=True)
class Ending:
    """How a process ended: `cause` for the code, `reason` for people and models."""

    cause: DeathCause
    reason: str

    def death(self, *, restarted: bool) -> Death:
        """Return the wire form of this end under an execution."""
        return Death(reason=self.reason, cause=self.cause, restarted=restarted)


def exit_ending(returncode: int | None) -> Ending:
    """Return how a process whose exit status is `returncode` (None: still there) ended."""
    if returncode is None:
        return Ending("no_answer", "the kernel process stopped responding")
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return Ending("signal", f"the kernel process was killed by {name}")
    return Ending("exit", f"the kernel process exited with code {returncode}")
