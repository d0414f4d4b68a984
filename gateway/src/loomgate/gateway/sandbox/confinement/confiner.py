"""The seam between a kernel's sandbox policy (`SandboxRules`) and the mechanism that enforces
it: a `Confiner` per mechanism (bubblewrap, Landlock only, sandbox-exec), and
`SandboxUnavailable`, whose sentence names what is missing and how to get it."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from loomgate.gateway.sandbox.policy.profiles import SandboxRules

if TYPE_CHECKING:
    from loomgate.gateway.process_identity import ProcessIdentity
    from loomgate.gateway.sandbox.confinement.limits import KernelLimits

__all__ = ["OR_NONE", "Confiner", "KernelSandbox", "SandboxUnavailable", "Start"]

OR_NONE = "or choose the sandbox profile none"

T = TypeVar("T")
# How the provisioner starts a process: its argv and the fds it passes on.
Start = Callable[[list[str], tuple[int, ...]], T]


class SandboxUnavailable(Exception):
    """A profile cannot be enforced here; the message says what is missing and how to get it."""


class KernelSandbox(Protocol):
    """What a confiner needs of one kernel's sandbox (a `SandboxLaunch`)."""

    rules: SandboxRules
    directory: Path  # the kernel's own dir (kernel_dirs_root()/ID)
    limits: KernelLimits
    # While a start waits for the gateway to put it in the kernel's cgroups: the fd to tell it
    # through (see LandlockConfiner), closed by `started()` or when the sandbox is removed.
    ready_fd: int | None
    proxy_port: int | None  # its proxy's loopback port, where it shares the host's network
    tcp_ports: tuple[int, ...]  # a TCP kernel's own ports, where it shares the host's network
    relay: list[tuple[Path, int]]  # into a namespace of its own: (the gateway's socket, port)


class Confiner(ABC):
    """How one mechanism confines a kernel: what it says of itself and of what it cannot give,
    which rules it refuses, how it starts the kernel and how the kernel is signalled. Chosen once
    per gateway by `mechanism.probe()`; rebuilt from `to_json()` for a kernel taken back."""

    kind: ClassVar[str]  # "bubblewrap", "landlock" or "sandbox-exec": kept in a launch's JSON
    # Signals go to a sandbox's init (which `started()` names) rather than to the process the
    # provisioner launched.
    has_init: ClassVar[bool] = False
    # The kernel has a network namespace of its own: its proxy is reached through a unix socket
    # bound into it (and a bridge inside); otherwise through a loopback port of the host's.
    own_network: ClassVar[bool] = False
    own_tmp: ClassVar[bool] = False  # a /tmp of its own: the host's is not visible to it

    @abstractmethod
    def describe(self, rules: SandboxRules | None = None) -> str:
        """Return how `rules` are enforced, e.g. "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock
        scopes, cgroup v1"; without rules, what this confiner brings to any kernel."""

    @abstractmethod
    def lacks(self, rules: SandboxRules | None = None) -> list[str]:
        """Return what this confiner cannot give a kernel under `rules` (without rules: under
        any profile), each in a few words ("its own /tmp")."""

    @abstractmethod
    def check(self, rules: SandboxRules) -> None:
        """Raise SandboxUnavailable unless every rule of (confined) `rules` can be enforced."""

    @abstractmethod
    def create_limits(self, kernel_id: str, rules: SandboxRules) -> KernelLimits:
        """Return the limits of kernel `kernel_id` under `rules`, created (its cgroups)."""

    def prepare(self, sandbox: KernelSandbox) -> None:  # noqa: B027 (most confiners need none)
        """Make what the start needs in the kernel's own dir beyond its common layout."""

    @abstractmethod
    def spawn(
        self,
        sandbox: KernelSandbox,
        kernel_cmd: Sequence[str],
        start: Start[T],
        *,
        cwd: Path,
        connection_file: Path,
        unset_env: Sequence[str],
    ) -> T:
        """Return `start(argv, pass_fds)` for the argv that runs `kernel_cmd` confined."""

    async def started(self, sandbox: KernelSandbox, pid: int | None) -> ProcessIdentity | None:
        """Finish the start whose launched process is `pid`; return the sandbox's init once the
        start has named it (None: it has none)."""
        return None

    def signal_init(self, init_pid: int, signum: int) -> None:
        """Send `signum` into a sandbox whose init is `init_pid` (only when `has_init`): to its
        process group, where the kernel is."""
        os.killpg(init_pid, signum)

    def to_json(self) -> dict[str, Any]:
        """Return what rebuilds this confiner (its kind and facts) for a later gateway."""
        return {"kind": self.kind}
