"""A kernel's memory and process limits: its cgroup (v1 or v2) or systemd scope, else rlimits;
whether the memory limit killed it; removing the cgroup after it."""

from __future__ import annotations

import errno
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loomgate.gateway.sandbox.mechanism import LimitsHost, limits_mechanism, probe
from loomgate.gateway.sandbox.profiles import SandboxRules

__all__ = ["KernelLimits"]

KERNEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
PREFIX = "loomgate-"  # each kernel's cgroup (or systemd unit) is named PREFIX + its id
SYSTEMCTL_TIMEOUT = 10.0
REMOVE_TIMEOUT = 5.0  # seconds an emptied cgroup may stay busy
REMOVE_POLL = 0.005


@dataclass
class KernelLimits:
    """The limits one kernel runs under, and where they live."""

    kernel_id: str
    mechanism: str  # "cgroup v1", "cgroup v2", "systemd scope", "rlimits" or "none"
    groups: dict[str, Path] = field(default_factory=dict)  # controller -> the kernel's cgroup
    rlimits: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (soft, hard)
    prefix: list[str] = field(default_factory=list)  # argv in front of the entry (systemd-run)
    # The memory limit's kills before this start: a kernel's cgroup lives through its restarts.
    oom_kills: int = 0

    @classmethod
    def create(
        cls, kernel_id: str, rules: SandboxRules, host: LimitsHost | None = None
    ) -> KernelLimits:
        """Create the limits of kernel `kernel_id` under `rules` on `host` (this machine's by
        default); SandboxUnavailable when they cannot be enforced."""
        if not KERNEL_ID.fullmatch(kernel_id):
            raise ValueError(
                f"kernel id {kernel_id!r} cannot name a cgroup: use letters, digits, '_', '-', '.'"
            )
        host = host if host is not None else probe().limits
        mechanism = limits_mechanism(host, rules)
        limits = cls(kernel_id, mechanism)
        if mechanism == "rlimits" and rules.memory is not None:
            limits.rlimits["RLIMIT_DATA"] = (rules.memory, rules.memory)
        elif mechanism == "systemd scope":
            assert host.systemd_run is not None
            limits.prefix = scope_prefix(host.systemd_run, limits.unit, rules)
        elif mechanism.startswith("cgroup"):
            try:
                limits.make_groups(host, rules)
            except OSError:
                limits.remove()
                raise
            limits.oom_kills = limits.memory_kills()
        return limits

    @property
    def unit(self) -> str:
        """Return the systemd unit name of this kernel's scope."""
        return f"{PREFIX}{self.kernel_id}.scope"

    @property
    def join_files(self) -> list[str]:
        """Return the cgroup.procs files the entry writes its pid into."""
        dirs = dict.fromkeys(self.groups.values())
        return [str(directory / "cgroup.procs") for directory in dirs]

    def make_groups(self, host: LimitsHost, rules: SandboxRules) -> None:
        """Create this kernel's cgroups under `host`'s and write `rules`' limits into them."""
        needs = {"memory": rules.memory, "pids": rules.processes}
        for controller, value in needs.items():
            if value is None:
                continue
            group = host.cgroups[controller] / f"{PREFIX}{self.kernel_id}"
            group.mkdir(exist_ok=True)  # a crashed gateway's group for this id is taken over
            self.groups[controller] = group
        memory, pids = self.groups.get("memory"), self.groups.get("pids")
        if self.mechanism == "cgroup v1":
            if memory is not None:
                write(memory / "memory.limit_in_bytes", rules.memory)
                # Without swap accounting the kernel could swap out past the limit.
                if (memory / "memory.memsw.limit_in_bytes").exists():
                    write(memory / "memory.memsw.limit_in_bytes", rules.memory)
                else:
                    write(memory / "memory.swappiness", 0)
        elif memory is not None:
            write(memory / "memory.max", rules.memory)
            if (memory / "memory.swap.max").exists():
                write(memory / "memory.swap.max", 0)
        if pids is not None:
            write(pids / "pids.max", rules.processes)

    def memory_kills(self) -> int:
        """Return how many processes of this kernel's cgroup the memory limit has killed."""
        memory = self.groups.get("memory")
        if self.mechanism == "cgroup v1" and memory is not None:
            return counter(memory / "memory.oom_control", "oom_kill")
        if self.mechanism == "cgroup v2" and memory is not None:
            return counter(memory / "memory.events", "oom_kill")
        return 0

    def memory_killed(self) -> bool:
        """Return whether the memory limit has killed a process of this kernel since this start
        (ask before remove(): the count goes with the cgroup)."""
        if self.mechanism in ("cgroup v1", "cgroup v2"):
            return self.memory_kills() > self.oom_kills
        if self.mechanism == "systemd scope":
            return systemctl(self.prefix, "show", "--property=Result", "--value", self.unit) == (
                "oom-kill"
            )
        return False  # rlimits: the kernel gets MemoryError and lives

    def remove(self, timeout: float = REMOVE_TIMEOUT) -> bool:
        """Remove this kernel's cgroups once no process is left in them (waiting up to `timeout`
        seconds for the last ones to exit); return whether they are gone (False: processes
        still hold some). Removing twice is harmless."""
        if self.mechanism == "systemd scope":
            systemctl(self.prefix, "reset-failed", self.unit)
        deadline = time.monotonic() + timeout
        groups = list(dict.fromkeys(self.groups.values()))
        while groups:
            group = groups[0]
            try:
                group.rmdir()
            except FileNotFoundError:
                pass
            except OSError as error:
                if error.errno != errno.EBUSY:
                    raise
                # bwrap exits as soon as its command has: the sandbox's init may be exiting still.
                if time.monotonic() > deadline:
                    return False
                time.sleep(REMOVE_POLL)
                continue
            groups.pop(0)
        return True

    def to_json(self) -> dict[str, Any]:
        """Return these limits as JSON data, for a later gateway that takes the kernel back."""
        return {
            "kernel_id": self.kernel_id,
            "mechanism": self.mechanism,
            "groups": {controller: str(path) for controller, path in self.groups.items()},
            "rlimits": {name: list(pair) for name, pair in self.rlimits.items()},
            "prefix": list(self.prefix),
            "oom_kills": self.oom_kills,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelLimits:
        """Return the limits `to_json()` gave."""
        return cls(
            kernel_id=str(data["kernel_id"]),
            mechanism=str(data["mechanism"]),
            groups={str(c): Path(p) for c, p in data.get("groups", {}).items()},
            rlimits={str(n): (int(p[0]), int(p[1])) for n, p in data.get("rlimits", {}).items()},
            prefix=[str(part) for part in data.get("prefix", [])],
            oom_kills=int(data.get("oom_kills", 0)),
        )


def write(path: Path, value: int | None) -> None:
    """Write `value` into the cgroup file `path`."""
    path.write_text(str(value))


def counter(path: Path, name: str) -> int:
    """Return counter `name` of a cgroup's "name value" lines file, 0 when it is gone."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        key, _, value = line.partition(" ")
        if key == name:
            return int(value)
    return 0


def scope_prefix(systemd_run: str, unit: str, rules: SandboxRules) -> list[str]:
    """Return the `systemd-run --user --scope` argv that puts the entry in its own scope."""
    prefix = [systemd_run, "--user", "--scope", "--quiet", f"--unit={unit}"]
    if rules.memory is not None:
        prefix += ["-p", f"MemoryMax={rules.memory}", "-p", "MemorySwapMax=0"]
    if rules.processes is not None:
        prefix += ["-p", f"TasksMax={rules.processes}"]
    return [*prefix, "--"]


def systemctl(prefix: list[str], *args: str) -> str:
    """Run `systemctl --user ARGS` next to the systemd-run of `prefix`; return its output."""
    tool = str(Path(prefix[0]).with_name("systemctl")) if prefix else "systemctl"
    try:
        done = subprocess.run(
            [tool, "--user", *args],
            capture_output=True,
            text=True,
            timeout=SYSTEMCTL_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip()
