"""What this machine can enforce, and the sentences for what it cannot: the real probe here,
and the decisions table-tested on described machines."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import mechanism
from loomgate.gateway.sandbox.mechanism import LimitsHost, Mechanism, SandboxUnavailable
from tests.gateway.sandbox import sandboxes

V1 = LimitsHost(1, {"memory": Path("/m"), "pids": Path("/p")})
V1_MEMORY_ONLY = LimitsHost(1, {"memory": Path("/m")})
V2 = LimitsHost(2, {"memory": Path("/g"), "pids": Path("/g")})
SCOPE = LimitsHost(None, {}, "/usr/bin/systemd-run")
NOWHERE = LimitsHost()
HERE_MOUNTINFO = """\
24 31 0:22 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HERE_CGROUP = "8:pids:/\n4:memory:/process_api/abc\n1:cpu:/\n0::/\n"


def machine(
    system: str = "Linux",
    bwrap: str | None = "/usr/bin/bwrap",
    abi: int = 7,
    limits: LimitsHost = V1,
) -> Mechanism:
    """Return a described machine."""
    problem = None if bwrap else "bubblewrap is not installed: `apt-get install bubblewrap`"
    return Mechanism(system, bwrap, problem, abi, limits)


def test_this_machine_enforces_everything() -> None:
    here = mechanism.probe()
    assert here is mechanism.probe()  # found once per process
    assert here.bwrap is not None and os.access(here.bwrap, os.X_OK)
    assert here.landlock_scopes
    assert here.limits.cgroup_version == 1 and set(here.limits.cgroups) == {"memory", "pids"}
    rules = sandboxes.rules(memory=2**30, processes=100)
    here.check(rules)
    assert here.describe(rules) == "bubblewrap, landlock scopes, cgroup v1"


@pytest.mark.parametrize(
    ("described", "rules", "says"),
    [
        (machine("Darwin"), sandboxes.rules(), "sandbox-exec"),
        (machine("FreeBSD"), sandboxes.rules(), "need Linux .* or macOS .*choose the sandbox"),
        (machine(bwrap=None), sandboxes.rules(), "apt-get install bubblewrap"),
        (machine(abi=0), sandboxes.rules(network=True), "no Landlock.*network = false"),
        (machine(abi=5), sandboxes.rules(network=True), "Landlock ABI 6 .*ABI 5"),
        (machine(limits=NOWHERE), sandboxes.rules(processes=10), "processes = false"),
        (machine(limits=V1_MEMORY_ONLY), sandboxes.rules(processes=10), "no writable cgroup"),
    ],
)
def test_what_cannot_be_enforced_is_refused_with_a_way_out(
    described: Mechanism, rules: object, says: str
) -> None:
    with pytest.raises(SandboxUnavailable, match=says):
        described.check(rules)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("described", "rules", "description"),
    [
        (
            machine(),
            sandboxes.rules(memory=1, processes=1),
            "bubblewrap, landlock scopes, cgroup v1",
        ),
        (machine(abi=0), sandboxes.rules(network=False), "bubblewrap"),
        (
            machine(limits=V2),
            sandboxes.rules(processes=1),
            "bubblewrap, landlock scopes, cgroup v2",
        ),
        (
            machine(limits=SCOPE),
            sandboxes.rules(memory=1),
            "bubblewrap, landlock scopes, systemd scope",
        ),
        (
            machine(limits=NOWHERE),
            sandboxes.rules(memory=1),
            "bubblewrap, landlock scopes, rlimits",
        ),
        (
            machine(limits=V1_MEMORY_ONLY),
            sandboxes.rules(memory=1),
            "bubblewrap, landlock scopes, cgroup v1",
        ),
    ],
)
def test_what_can_be_enforced_is_described(
    described: Mechanism, rules: object, description: str
) -> None:
    described.check(rules)  # type: ignore[arg-type]
    assert described.describe(rules) == description  # type: ignore[arg-type]


def test_an_unconfined_profile_needs_nothing() -> None:
    rules = sandboxes.rules(processes=1)
    rules = type(rules)(**{**vars(rules), "confined": False})
    for described in (machine("Darwin"), machine(bwrap=None, abi=0, limits=NOWHERE)):
        described.check(rules)
        assert described.describe(rules) == "not confined"


def test_cgroups_are_found_from_mountinfo_and_our_own_cgroup(tmp_path: Path) -> None:
    assert mechanism.parse_cgroup(HERE_CGROUP) == {
        "pids": "/",
        "memory": "/process_api/abc",
        "cpu": "/",
        "": "/",
    }
    mounts = mechanism.parse_mountinfo(HERE_MOUNTINFO)
    assert [m[:2] for m in mounts] == [
        ("/sys/fs/cgroup/memory", "cgroup"),
        ("/sys/fs/cgroup/pids", "cgroup"),
        ("/sys/fs/cgroup/unified", "cgroup2"),
    ]
    own = mechanism.parse_cgroup(HERE_CGROUP)
    assert mechanism.v1_groups(mounts, own) == {
        "memory": Path("/sys/fs/cgroup/memory/process_api/abc"),
        "pids": Path("/sys/fs/cgroup/pids"),
    }
    assert mechanism.v2_groups(mounts, own) == {}  # the unified hierarchy delegates nothing here


def test_a_delegated_cgroup_v2_dir_is_preferred(tmp_path: Path) -> None:
    group = tmp_path / "user.slice" / "gateway"
    group.mkdir(parents=True)
    (group / "cgroup.subtree_control").write_text("cpu memory pids\n")
    mountinfo = f"41 31 0:38 / {tmp_path} rw,relatime - cgroup2 cgroup2 rw\n"
    host = mechanism.limits_host(mountinfo, "0::/user.slice/gateway\n", env={})
    assert host == LimitsHost(2, {"memory": group, "pids": group})
    group.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        # Read-only to us: nothing delegated (root ignores modes, so only check as a person).
        if os.geteuid() != 0:
            assert mechanism.limits_host(mountinfo, "0::/user.slice/gateway\n", env={}) == NOWHERE
    finally:
        group.chmod(0o755)


def test_the_running_probe_sentences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert mechanism.working_bwrap() == (
        None,
        "bubblewrap is not installed: `apt-get install bubblewrap` (or your distribution's "
        "bubblewrap package), or choose the sandbox profile none",
    )
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    found, problem = mechanism.working_bwrap()
    assert found is None and problem is not None
    assert "(bwrap: setting up uid map: Permission denied)" in problem
    assert "user namespaces" in problem and problem.endswith("or choose the sandbox profile none")
    assert subprocess.run([str(broken)], capture_output=True, check=False).returncode == 1
