"""Sandbox profiles: what a kernel may read, write, reach and use, as written and as made
concrete for one kernel."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from loomgate.shared.wire import SandboxRule as Rule

__all__ = ["Rule", "SandboxProfile", "SandboxRules", "at_least_as_strict"]


@dataclass(frozen=True)
class SandboxProfile:
    """A profile as the person writes it: paths may hold `~` and `{cwd}`."""

    name: str
    confined: bool  # False only for `none`
    writable: tuple[str, ...]
    hidden: tuple[str, ...]  # the profile's own, on top of ALWAYS_HIDDEN
    network: bool
    memory: int | None  # bytes; None: no limit
    processes: int | None  # None: no limit

    def rules(self, *, cwd: Path, home: Path, private: tuple[Path, ...] = ()) -> SandboxRules:
        """Return this profile made concrete for a kernel working in `cwd`."""
        raise NotImplementedError


@dataclass(frozen=True)
class SandboxRules:
    """A profile made concrete for one kernel: absolute paths, always-hidden ones included."""

    profile: str
    confined: bool
    writable: tuple[Path, ...]  # the kernel's own temp dir is not listed: it always has one
    hidden: tuple[Path, ...]  # ALWAYS_HIDDEN, the profile's own and the private dirs
    network: bool
    memory: int | None
    processes: int | None


def at_least_as_strict(a: SandboxRules, b: SandboxRules) -> bool:
    """Return whether `a` allows nothing that `b` forbids (decided by the rules, not names)."""
    raise NotImplementedError
