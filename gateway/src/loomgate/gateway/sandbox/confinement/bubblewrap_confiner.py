"""The bubblewrap confiner: a kernel started through the entry (Landlock scopes, cgroups,
rlimits) into `bwrap` (the one on PATH, or the one loomgate ships), whose init is what gets
signalled and killed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.sandbox.confinement import bubblewrap, entry, landlock
from loomgate.gateway.sandbox.confinement.confiner import (
    OR_NONE,
    Confiner,
    KernelSandbox,
    SandboxUnavailable,
    Start,
)
from loomgate.gateway.sandbox.confinement.limits import (
    KernelLimits,
    LimitsHost,
    limits_lacks,
    limits_mechanism,
)
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

__all__ = ["INIT_TIMEOUT", "BubblewrapConfiner"]

INIT_TIMEOUT = 10.0  # how long a start waits for bubblewrap to name its init
T = TypeVar("T")


class BubblewrapConfiner(Confiner):
    """Namespaces and mounts by bwrap `bwrap` (of `version`; `shipped`: the one loomgate ships),
    Landlock scopes where the ABI has them, limits on `host`."""

    kind: ClassVar[str] = "bubblewrap"
    has_init: ClassVar[bool] = True
    own_network: ClassVar[bool] = True
    own_tmp: ClassVar[bool] = True

    def __init__(
        self,
        bwrap: str,
        version: str = "",
        *,
        shipped: bool = False,
        landlock_abi: int = 0,
        host: LimitsHost | None = None,
    ) -> None:
        self.bwrap = bwrap
        self.version = version
        self.shipped = shipped
        self.landlock_abi = landlock_abi
        self.host = host if host is not None else LimitsHost()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BubblewrapConfiner) and (self.to_json(), self.host) == (
            other.to_json(),
            other.host,
        )

    def __repr__(self) -> str:
        return f"BubblewrapConfiner({self.to_json()!r})"

    @property
    def landlock_scopes(self) -> bool:
        """Return whether Landlock can scope abstract unix sockets and signals here."""
        return self.landlock_abi >= landlock.SCOPES_ABI

    def name(self) -> str:
        """Return which bwrap this is: "bubblewrap 0.8.0 (/usr/bin/bwrap)", "bubblewrap 0.11.0
        (shipped with loomgate)"."""
        where = "shipped with loomgate" if self.shipped else self.bwrap
        return " ".join(filter(None, ("bubblewrap", self.version))) + f" ({where})"

    def describe(self, rules: SandboxRules | None = None) -> str:
        """Return how `rules` are enforced, e.g. "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock
        scopes, cgroup v1"."""
        parts = [self.name()]
        if self.landlock_scopes:
            parts.append("landlock scopes")
        limits = self.host.offers() if rules is None else limits_mechanism(self.host, rules)
        if limits != "none":
            parts.append(limits)
        return ", ".join(parts)

    def lacks(self, rules: SandboxRules | None = None) -> list[str]:
        """Return what bubblewrap cannot give here: only limits short of a cgroup (an rlimit
        holds processes only with the user's others)."""
        how = self.host.offers() if rules is None else limits_mechanism(self.host, rules)
        return limits_lacks(how, rules)

    def check(self, rules: SandboxRules) -> None:
        """Raise SandboxUnavailable unless `rules` can be enforced: on the host's own network
        (`network = "host"`) the kernel shares the host's network namespace, so abstract unix
        sockets outside are kept from it only by Landlock's scopes (ABI 6)."""
        # Any other kernel has its own network namespace: no abstract socket outside is
        # reachable, and its pid namespace already keeps it from naming outside processes.
        if rules.network.host and not self.landlock_scopes:
            abi = self.landlock_abi
            found = "no Landlock" if abi == 0 else f"Landlock ABI {abi}"
            raise SandboxUnavailable(
                f"profile {rules.profile!r} uses the host's network, and keeping its kernel from "
                f"abstract unix sockets outside (D-Bus, X11) needs Landlock ABI "
                f"{landlock.SCOPES_ABI} (Linux 6.12 or later; this kernel has {found}): "
                f"upgrade the kernel, use a profile with network = true (through loomgate's "
                f"proxy), {OR_NONE}"
            )

    def create_limits(self, kernel_id: str, rules: SandboxRules) -> KernelLimits:
        """Return kernel `kernel_id`'s limits on this host (its cgroups created)."""
        return KernelLimits.create(kernel_id, rules, self.host)

    def plan(self, sandbox: KernelSandbox) -> entry.Plan:
        """Return what the entry does for `sandbox` before bwrap runs."""
        limits = sandbox.limits
        return entry.Plan(limits.join_files, limits.rlimits, landlock=self.landlock_scopes)

    def command(
        self,
        sandbox: KernelSandbox,
        kernel_cmd: Sequence[str],
        *,
        cwd: Path,
        connection_file: Path,
        unset_env: Sequence[str],
        info_fd: int | None = None,
    ) -> list[str]:
        """Return the argv that starts `kernel_cmd` through the entry into bwrap (bwrap
        writing its init's pid into `info_fd`)."""
        bwrap = bubblewrap.command(
            sandbox.rules,
            kernel_cmd,
            bwrap=self.bwrap,
            cwd=cwd,
            kernel_dir=sandbox.directory,
            connection_file=connection_file,
            unset_env=unset_env,
            info_fd=info_fd,
            relay=sandbox.relay,
        )
        return [*sandbox.limits.prefix, *entry.command(self.plan(sandbox), bwrap)]

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
        """Return `start(argv, pass_fds)` for the entry and bwrap, called on the entry's thread,
        with bwrap's info file open on the fds to pass while it runs."""
        fd = entry.open_info(bubblewrap.info_file(sandbox.directory))
        try:
            argv = self.command(
                sandbox,
                kernel_cmd,
                cwd=cwd,
                connection_file=connection_file,
                unset_env=unset_env,
                info_fd=fd,
            )
            return entry.spawn(self.plan(sandbox), lambda: start(argv, (fd,)))
        finally:
            os.close(fd)

    async def started(self, sandbox: KernelSandbox, pid: int | None) -> ProcessIdentity | None:
        """Return the sandbox's init once bubblewrap has named it in its info file."""
        info = bubblewrap.info_file(sandbox.directory)
        pid = await asyncio.to_thread(entry.read_info, info, INIT_TIMEOUT)
        return ProcessIdentity.of(pid)

    def signal_init(self, init_pid: int, signum: int) -> None:
        """Send `signum` into the sandbox: SIGKILL to its init (which ends everything in it),
        any other signal to its init's process group (the kernel is in it, by --new-session;
        bwrap's own group, which jupyter_client signals, does not hold it) and to the group of
        each of the init's children (a kernel that makes a group of its own: ipymini)."""
        if signum == signal.SIGKILL:
            bubblewrap.kill(init_pid)
            return
        os.killpg(init_pid, signum)  # ProcessLookupError: the sandbox is gone
        for child in bubblewrap.children(init_pid):
            with contextlib.suppress(ProcessLookupError):
                group = os.getpgid(child)
                if group != init_pid:
                    os.killpg(group, signum)

    def to_json(self) -> dict[str, Any]:
        """Return this confiner's kind and facts."""
        return {
            "kind": self.kind,
            "bwrap": self.bwrap,
            "version": self.version,
            "shipped": self.shipped,
            "landlock_abi": self.landlock_abi,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BubblewrapConfiner:
        """Return the confiner `to_json` described (a kernel taken back is signalled by it)."""
        return cls(
            str(data.get("bwrap", "bwrap")),
            str(data.get("version", "")),
            shipped=bool(data.get("shipped", False)),
            landlock_abi=int(data.get("landlock_abi", 0)),
        )
