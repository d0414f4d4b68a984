"""What this machine can enforce (bubblewrap, Landlock scopes, which cgroups for limits), and
`SandboxUnavailable`, whose sentence names what is missing and how to get it."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from loomgate.gateway.sandbox import landlock
from loomgate.gateway.sandbox.bubblewrap import ISOLATION
from loomgate.gateway.sandbox.macos import SANDBOX_EXEC
from loomgate.gateway.sandbox.profiles import SandboxRules

__all__ = [
    "LimitsHost",
    "Mechanism",
    "SandboxUnavailable",
    "check",
    "limits_mechanism",
    "probe",
]

OR_NONE = "or choose the sandbox profile none"
PROBE_TIMEOUT = 10.0  # seconds for bwrap's trial run


class SandboxUnavailable(Exception):
    """A profile cannot be enforced here; the message says what is missing and how to get it."""


@dataclass(frozen=True)
class LimitsHost:
    """Where this machine can put a kernel's limits."""

    cgroup_version: int | None = None  # 1 or 2: the cgroups below are of that version
    cgroups: Mapping[str, Path] = field(default_factory=dict)  # controller -> writable parent
    systemd_run: str | None = None  # systemd-run, with a reachable user manager on cgroup v2


@dataclass(frozen=True)
class Mechanism:
    """What this machine can enforce, found once per process by `probe()`."""

    system: str  # os.uname().sysname
    bwrap: str | None  # the bwrap that works here
    bwrap_problem: str | None  # why there is none (the sentence SandboxUnavailable gives)
    landlock_abi: int
    limits: LimitsHost

    @property
    def landlock_scopes(self) -> bool:
        """Return whether Landlock can scope abstract unix sockets and signals here."""
        return self.landlock_abi >= landlock.SCOPES_ABI

    def check(self, rules: SandboxRules) -> None:
        """Raise SandboxUnavailable unless every rule of `rules` can be enforced here."""
        if not rules.confined:
            return
        if self.system == "Darwin":
            self.check_macos(rules)
            return
        if self.system != "Linux":
            raise SandboxUnavailable(
                f"sandboxed kernels need Linux (bubblewrap) or macOS (sandbox-exec); this "
                f"system is {self.system}: {OR_NONE}"
            )
        if self.bwrap is None:
            raise SandboxUnavailable(self.bwrap_problem or f"bubblewrap is missing: {OR_NONE}")
        # Off the network the kernel has its own network namespace: no abstract socket outside
        # is reachable, and its pid namespace already keeps it from naming outside processes.
        if rules.network and not self.landlock_scopes:
            found = "no Landlock" if self.landlock_abi == 0 else f"Landlock ABI {self.landlock_abi}"
            raise SandboxUnavailable(
                f"profile {rules.profile!r} allows the network, and keeping its kernel from "
                f"abstract unix sockets outside (D-Bus, X11) needs Landlock ABI "
                f"{landlock.SCOPES_ABI} (Linux 6.12 or later; this kernel has {found}): "
                f"upgrade the kernel, use a profile with network = false, {OR_NONE}"
            )
        limits_mechanism(self.limits, rules)

    def check_macos(self, rules: SandboxRules) -> None:
        """Raise SandboxUnavailable unless sandbox-exec can enforce `rules` (no limits: macOS
        has no per-kernel memory or process limit loomgate can set)."""
        if not Path(SANDBOX_EXEC).exists():
            raise SandboxUnavailable(f"{SANDBOX_EXEC} is missing: {OR_NONE}")
        if rules.memory is not None or rules.processes is not None:
            raise SandboxUnavailable(
                f"profile {rules.profile!r} sets a memory or process limit, which loomgate "
                "cannot enforce on macOS: set memory = false and processes = false in "
                f"sandbox.toml, {OR_NONE}"
            )

    def describe(self, rules: SandboxRules) -> str:
        """Return how `rules` are enforced here, e.g. "bubblewrap, landlock scopes, cgroup v1"."""
        if not rules.confined:
            return "not confined"
        if self.system == "Darwin":
            return "sandbox-exec"
        parts = ["bubblewrap"]
        if self.landlock_scopes:
            parts.append("landlock scopes")
        limits = limits_mechanism(self.limits, rules)
        if limits != "none":
            parts.append(limits)
        return ", ".join(parts)


def limits_mechanism(host: LimitsHost, rules: SandboxRules) -> str:
    """Return how `rules`' limits are enforced on `host`: "cgroup v1", "cgroup v2",
    "systemd scope", "rlimits" or "none"; SandboxUnavailable when they cannot be."""
    needs = {"memory"} if rules.memory is not None else set()
    if rules.processes is not None:
        needs.add("pids")
    if not needs:
        return "none"
    if host.cgroup_version is not None and needs <= set(host.cgroups):
        return f"cgroup v{host.cgroup_version}"
    if host.systemd_run is not None:
        return "systemd scope"
    if "pids" not in needs:
        return "rlimits"  # memory: RLIMIT_DATA
    raise SandboxUnavailable(
        f"profile {rules.profile!r} limits processes, which needs a cgroup per kernel, and "
        "none can be made here (no writable cgroup v1 pids hierarchy, no delegated cgroup v2 "
        "subtree, no `systemd-run --user`): run the gateway where it may create cgroups (e.g. "
        "in a systemd user session), set `processes = false` in the profile, "
        f"{OR_NONE}"
    )


@functools.cache
def probe() -> Mechanism:
    """Return what this machine can enforce (found once per process)."""
    system = os.uname().sysname
    if system != "Linux":
        return Mechanism(system, None, None, 0, LimitsHost())
    bwrap, problem = working_bwrap()
    return Mechanism(system, bwrap, problem, landlock.abi_version(), limits_host())


def working_bwrap() -> tuple[str | None, str | None]:
    """Return the bwrap that runs a trial sandbox here, or None and the sentence saying why."""
    found = shutil.which("bwrap")
    if found is None:
        return None, (
            "bubblewrap is not installed: `apt-get install bubblewrap` (or your distribution's "
            f"bubblewrap package), {OR_NONE}"
        )
    trial = [found, *ISOLATION, "--unshare-net", "--ro-bind", "/", "/", "--proc", "/proc"]
    try:
        done = subprocess.run(
            [*trial, "--dev", "/dev", "true"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"bubblewrap ({found}) did not run: {error}; {OR_NONE}"
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return None, (
            f"bubblewrap ({found}) cannot create a sandbox here ({said}); it needs user "
            "namespaces (sysctl user.max_user_namespaces > 0; on Ubuntu also "
            f"kernel.apparmor_restrict_unprivileged_userns=0) and bubblewrap 0.8 or later, "
            f"{OR_NONE}"
        )
    return found, None


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


def check(rules: SandboxRules) -> None:
    """Raise SandboxUnavailable unless `rules` can be enforced on this machine."""
    probe().check(rules)
