"""A kernel's memory and process limits: where this machine can put them (a cgroup, v1 or v2, or
a systemd scope, else rlimits), the limits of one kernel there, whether the memory limit killed
it, and removing its cgroup after it."""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loomgate.gateway.sandbox.policy.profiles import SandboxRules

__all__ = [
    "NPROC_ROOT",
    "NPROC_WEAKER",
    "KernelLimits",
    "LimitsHost",
    "limits_host",
    "limits_lacks",
    "limits_mechanism",
]

KERNEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
PREFIX = "loomgate-"  # each kernel's cgroup (or systemd unit) is named PREFIX + its id
SYSTEMCTL_TIMEOUT = 10.0
REMOVE_TIMEOUT = 5.0  # seconds an emptied cgroup may stay busy
REMOVE_POLL = 0.005
# What a processes limit by RLIMIT_NPROC is worth, said where the mechanism is shown.
NPROC_WEAKER = "processes held by RLIMIT_NPROC, which counts every process of your user"
NPROC_ROOT = "a processes limit (RLIMIT_NPROC does not hold root's processes)"


@dataclass(frozen=True)
class LimitsHost:
    """Where this machine can put a kernel's limits."""

    cgroup_version: int | None = None  # 1 or 2: the cgroups below are of that version
    cgroups: Mapping[str, Path] = field(default_factory=dict)  # controller -> writable parent
    systemd_run: str | None = None  # systemd-run, with a reachable user manager on cgroup v2

    def offers(self) -> str:
        """Return where this host puts any kernel's limits: "cgroup v1", "cgroup v2",
        "systemd scope" or "rlimits"."""
        if self.cgroup_version is not None and {"memory", "pids"} <= set(self.cgroups):
            return f"cgroup v{self.cgroup_version}"
        return "systemd scope" if self.systemd_run is not None else "rlimits"


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
        """Create the limits of kernel `kernel_id` under `rules` on `host` (where this machine
        puts them, by default)."""
        if not KERNEL_ID.fullmatch(kernel_id):
            raise ValueError(
                f"kernel id {kernel_id!r} cannot name a cgroup: use letters, digits, '_', '-', '.'"
            )
        host = host if host is not None else limits_host()
        mechanism = limits_mechanism(host, rules)
        limits = cls(kernel_id, mechanism)
        if mechanism == "rlimits" and rules.memory is not None:
            limits.rlimits["RLIMIT_DATA"] = (rules.memory, rules.memory)
        if mechanism == "rlimits" and rules.processes is not None:
            limits.rlimits["RLIMIT_NPROC"] = (rules.processes, rules.processes)
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


def limits_mechanism(host: LimitsHost, rules: SandboxRules) -> str:
    """Return how `rules`' limits are enforced on `host`: "cgroup v1", "cgroup v2",
    "systemd scope", "rlimits" (memory by RLIMIT_DATA, processes by RLIMIT_NPROC) or "none"."""
    needs = {"memory"} if rules.memory is not None else set()
    if rules.processes is not None:
        needs.add("pids")
    if not needs:
        return "none"
    if host.cgroup_version is not None and needs <= set(host.cgroups):
        return f"cgroup v{host.cgroup_version}"
    if host.systemd_run is not None:
        return "systemd scope"
    return "rlimits"


def limits_lacks(how: str, rules: SandboxRules | None, uid: int | None = None) -> list[str]:
    """Return what limits enforced `how` (limits_mechanism, or LimitsHost.offers for any
    profile's: `rules` None) cannot give: processes by RLIMIT_NPROC are held only with the
    other processes of the user (`uid`, this process's by default), and root's not at all."""
    if how != "rlimits" or (rules is not None and rules.processes is None):
        return []
    return [NPROC_ROOT if (os.getuid() if uid is None else uid) == 0 else NPROC_WEAKER]


def limits_host(
    mountinfo: str | None = None, own_cgroup: str | None = None, env: Mapping[str, str] = os.environ
) -> LimitsHost:
    """Return where this process can put kernels' limits: a writable cgroup of its own per
    controller (v2 first), else a usable `systemd-run --user`, else nowhere (rlimits)."""
    mounts = parse_mountinfo(mountinfo if mountinfo is not None else read("/proc/self/mountinfo"))
    own = parse_cgroup(own_cgroup if own_cgroup is not None else read("/proc/self/cgroup"))
    v2 = writable(v2_groups(mounts, own))
    if v2:
        return LimitsHost(2, v2)
    v1 = writable(v1_groups(mounts, own))
    systemd_run = shutil.which("systemd-run")
    user_manager = Path(env.get("XDG_RUNTIME_DIR", "/nonexistent")) / "systemd" / "private"
    unified = any(point == "/sys/fs/cgroup" and kind == "cgroup2" for point, kind, _, _ in mounts)
    usable = systemd_run if systemd_run and unified and user_manager.exists() else None
    return LimitsHost(1 if v1 else None, v1, usable)


def read(path: str) -> str:
    """Return the text of `path`, empty when it cannot be read."""
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def parse_mountinfo(text: str) -> list[tuple[str, str, str, frozenset[str]]]:
    """Return the cgroup mounts in /proc/self/mountinfo `text`: (mount point, fs type, root
    of the mount, super options)."""
    found = []
    for line in text.splitlines():
        before, sep, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or not tail[0].startswith("cgroup"):
            continue
        found.append((fields[4], tail[0], fields[3], frozenset(tail[2].split(","))))
    return found


def parse_cgroup(text: str) -> dict[str, str]:
    """Return /proc/self/cgroup `text` as controller -> path ("" for the cgroup v2 line)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                found[controller] = parts[2]
    return found


def inside(point: str, root: str, path: str) -> Path:
    """Return the dir of cgroup `path` in a hierarchy mounted at `point` showing `root`."""
    relative = path[len(root) :] if root != "/" and path.startswith(root) else path
    return Path(point) / relative.lstrip("/")


def v1_groups(
    mounts: list[tuple[str, str, str, frozenset[str]]], own: Mapping[str, str]
) -> dict[str, Path]:
    """Return our own cgroup v1 dir for the memory and pids controllers that are mounted."""
    found: dict[str, Path] = {}
    for controller in ("memory", "pids"):
        for point, kind, root, options in mounts:
            if kind == "cgroup" and controller in options and controller in own:
                found[controller] = inside(point, root, own[controller])
                break
    return found


def v2_groups(
    mounts: list[tuple[str, str, str, frozenset[str]]], own: Mapping[str, str]
) -> dict[str, Path]:
    """Return our own cgroup v2 dir for each of memory and pids it delegates to children."""
    for point, kind, root, _ in mounts:
        if kind == "cgroup2" and "" in own:
            here = inside(point, root, own[""])
            enabled = read(str(here / "cgroup.subtree_control")).split()
            return {c: here for c in ("memory", "pids") if c in enabled}
    return {}


def writable(groups: dict[str, Path]) -> dict[str, Path]:
    """Return the groups of `groups` this process may create children in."""
    return {c: d for c, d in groups.items() if d.is_dir() and os.access(d, os.W_OK | os.X_OK)}
