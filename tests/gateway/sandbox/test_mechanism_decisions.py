"""What a described machine can enforce, and the sentences for what it cannot; the cgroups for
limits found from real mountinfo and cgroup text; no process runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import landlock, mechanism
from loomgate.gateway.sandbox.mechanism import LimitsHost, Mechanism, SandboxUnavailable
from loomgate.gateway.sandbox.profiles import SandboxRules
from tests.gateway.sandbox import sandboxes

V1 = LimitsHost(1, {"memory": Path("/m"), "pids": Path("/p")})
V1_MEMORY_ONLY = LimitsHost(1, {"memory": Path("/m")})
V2 = LimitsHost(2, {"memory": Path("/g"), "pids": Path("/g")})
SCOPE = LimitsHost(None, {}, "/usr/bin/systemd-run")
NOWHERE = LimitsHost()
OR_NONE = "or choose the sandbox profile none"
# This machine's /proc/self/mountinfo (cgroup v1 controllers, an empty unified hierarchy) and
# /proc/self/cgroup, in part.
HERE_MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HERE_CGROUP = (
    "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/2757a6bf5b93ea74794360e691c02e1d\n"
    "1:cpu:/\n0::/\n"
)


def machine(
    system: str = "Linux",
    bwrap: str | None = "/usr/bin/bwrap",
    abi: int = 7,
    limits: LimitsHost = V1,
    problem: str | None = "bubblewrap is not installed: `apt-get install bubblewrap`",
) -> Mechanism:
    """Return a described machine."""
    return Mechanism(system, bwrap, None if bwrap else problem, abi, limits)


def unconfined(rules: SandboxRules) -> SandboxRules:
    """Return `rules` unconfined."""
    return SandboxRules(**{**vars(rules), "confined": False})


@pytest.mark.parametrize(
    ("described", "rules", "says"),
    [
        (
            machine("FreeBSD"),
            sandboxes.rules(),
            "^sandboxed kernels need Linux \\(bubblewrap\\) or macOS \\(sandbox-exec\\); this "
            f"system is FreeBSD: {OR_NONE}$",
        ),
        (
            machine(bwrap=None),
            sandboxes.rules(),
            "^bubblewrap is not installed: `apt-get install bubblewrap`$",
        ),
        (
            machine(bwrap=None, problem=None),
            sandboxes.rules(),
            f"^bubblewrap is missing: {OR_NONE}$",
        ),
        (
            machine(abi=0),
            sandboxes.rules(network=True),
            "^profile 'test' allows the network, and keeping its kernel from abstract unix "
            "sockets outside \\(D-Bus, X11\\) needs Landlock ABI 6 \\(Linux 6.12 or later; this "
            "kernel has no Landlock\\): upgrade the kernel, use a profile with network = false, "
            f"{OR_NONE}$",
        ),
        (
            machine(abi=5),
            sandboxes.rules(network=True),
            "needs Landlock ABI 6 .*has Landlock ABI 5\\)",
        ),
        (
            machine(limits=NOWHERE),
            sandboxes.rules(processes=10),
            "^profile 'test' limits processes, which needs a cgroup per kernel, and none can be "
            "made here \\(no writable cgroup v1 pids hierarchy, no delegated cgroup v2 subtree, "
            "no `systemd-run --user`\\): run the gateway where it may create cgroups \\(e.g. in "
            "a systemd user session\\), set `processes = false` in the profile, "
            f"{OR_NONE}$",
        ),
        (machine(limits=V1_MEMORY_ONLY), sandboxes.rules(processes=10), "no writable cgroup"),
        (
            machine(limits=LimitsHost(None, {"pids": Path("/p")})),
            sandboxes.rules(processes=10),
            "no writable cgroup",
        ),
    ],
)
def test_what_cannot_be_enforced_is_refused_with_a_way_out(
    described: Mechanism, rules: SandboxRules, says: str
) -> None:
    with pytest.raises(SandboxUnavailable, match=says):
        described.check(rules)


@pytest.mark.parametrize(
    ("described", "rules", "description"),
    [
        (
            machine(),
            sandboxes.rules(memory=1, processes=1),
            "bubblewrap, landlock scopes, cgroup v1",
        ),
        (machine(), sandboxes.rules(), "bubblewrap, landlock scopes"),
        (machine(abi=0), sandboxes.rules(network=False), "bubblewrap"),
        (
            machine(abi=5, limits=V2),
            sandboxes.rules(network=False, memory=1),
            "bubblewrap, cgroup v2",
        ),
        (machine(abi=6), sandboxes.rules(network=True), "bubblewrap, landlock scopes"),
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
            machine(limits=SCOPE),
            sandboxes.rules(processes=1),
            "bubblewrap, landlock scopes, systemd scope",
        ),
        (
            machine(limits=LimitsHost(1, {"memory": Path("/m")}, "/usr/bin/systemd-run")),
            sandboxes.rules(memory=1, processes=1),
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
        (machine(limits=NOWHERE), sandboxes.rules(), "bubblewrap, landlock scopes"),
    ],
)
def test_what_can_be_enforced_is_described(
    described: Mechanism, rules: SandboxRules, description: str
) -> None:
    described.check(rules)
    assert described.describe(rules) == description


@pytest.mark.parametrize(("abi", "scopes"), [(0, False), (5, False), (6, True), (7, True)])
def test_landlock_scopes_come_with_abi_6(abi: int, scopes: bool) -> None:
    assert machine(abi=abi).landlock_scopes is scopes


def test_an_unconfined_profile_needs_nothing() -> None:
    rules = unconfined(sandboxes.rules(processes=1, network=True))
    for described in (
        machine("Darwin"),
        machine("FreeBSD"),
        machine(bwrap=None, abi=0, limits=NOWHERE),
    ):
        described.check(rules)
        assert described.describe(rules) == "not confined"


def test_macos_has_sandbox_exec_and_no_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    darwin = machine("Darwin", bwrap=None, abi=0, limits=NOWHERE)
    monkeypatch.setattr(mechanism, "SANDBOX_EXEC", "/nonexistent/sandbox-exec")
    with pytest.raises(
        SandboxUnavailable, match=f"^/nonexistent/sandbox-exec is missing: {OR_NONE}$"
    ):
        darwin.check(sandboxes.rules())
    monkeypatch.setattr(mechanism, "SANDBOX_EXEC", "/bin/sh")  # one that exists here
    darwin.check(sandboxes.rules(network=True))  # no Landlock needed there
    assert darwin.describe(sandboxes.rules(memory=1)) == "sandbox-exec"
    for limited in (sandboxes.rules(memory=1), sandboxes.rules(processes=1)):
        with pytest.raises(
            SandboxUnavailable,
            match="^profile 'test' sets a memory or process limit, which loomgate cannot "
            "enforce on macOS: set memory = false and processes = false in sandbox.toml, "
            f"{OR_NONE}$",
        ):
            darwin.check(limited)


@pytest.mark.parametrize(
    ("host", "rules", "how"),
    [
        (V1, sandboxes.rules(), "none"),
        (NOWHERE, sandboxes.rules(), "none"),
        (V1, sandboxes.rules(memory=1), "cgroup v1"),
        (V1, sandboxes.rules(processes=1), "cgroup v1"),
        (V2, sandboxes.rules(memory=1, processes=1), "cgroup v2"),
        (LimitsHost(None, {"memory": Path("/m")}), sandboxes.rules(memory=1), "rlimits"),
        (V1_MEMORY_ONLY, sandboxes.rules(memory=1, processes=1), None),
        (LimitsHost(2, {"pids": Path("/g")}), sandboxes.rules(processes=1), "cgroup v2"),
        (LimitsHost(2, {"pids": Path("/g")}), sandboxes.rules(memory=1), "rlimits"),
        (SCOPE, sandboxes.rules(memory=1, processes=1), "systemd scope"),
    ],
)
def test_limits_mechanism(host: LimitsHost, rules: SandboxRules, how: str | None) -> None:
    if how is None:
        with pytest.raises(SandboxUnavailable, match="limits processes"):
            mechanism.limits_mechanism(host, rules)
    else:
        assert mechanism.limits_mechanism(host, rules) == how


def test_cgroup_mounts_are_read_from_mountinfo() -> None:
    assert mechanism.parse_mountinfo(HERE_MOUNTINFO) == [
        ("/sys/fs/cgroup/cpu", "cgroup", "/", frozenset({"rw", "cpu"})),
        ("/sys/fs/cgroup/memory", "cgroup", "/", frozenset({"rw", "memory"})),
        ("/sys/fs/cgroup/pids", "cgroup", "/", frozenset({"rw", "pids"})),
        ("/sys/fs/cgroup/systemd", "cgroup", "/", frozenset({"rw", "name=systemd"})),
        ("/sys/fs/cgroup/unified", "cgroup2", "/", frozenset({"rw"})),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime cgroup cgroup rw,memory",  # no " - "
        "35 31 0:32 / - cgroup cgroup rw,memory",  # no mount point
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup",  # no super options
        "35 31 0:32 / /sys/fs/cgroup/memory rw - tmpfs cgroup rw,memory",  # not a cgroup
        "35 31 0:32 / /sys/fs/cgroup/memory rw - ",
        "",
    ],
)
def test_a_malformed_or_other_mountinfo_line_is_left_out(line: str) -> None:
    good = (
        "41 31 0:38 /sub /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 none rw,nsdelegate"
    )
    assert mechanism.parse_mountinfo(f"{line}\n{good}\n") == [
        ("/sys/fs/cgroup/unified", "cgroup2", "/sub", frozenset({"rw", "nsdelegate"}))
    ]


def test_our_own_cgroups_are_read_per_controller() -> None:
    text = HERE_CGROUP + "5:cpuset,cpuacct:/a:b\nnot a line\n7:blkio\n"
    assert mechanism.parse_cgroup(text) == {
        "name=systemd": "/",
        "pids": "/",
        "memory": "/process_api/2757a6bf5b93ea74794360e691c02e1d",
        "cpu": "/",
        "": "/",
        "cpuset": "/a:b",
        "cpuacct": "/a:b",
    }


@pytest.mark.parametrize(
    ("point", "root", "path", "found"),
    [
        ("/sys/fs/cgroup/memory", "/", "/a/b", "/sys/fs/cgroup/memory/a/b"),
        ("/sys/fs/cgroup/memory", "/", "/", "/sys/fs/cgroup/memory"),
        # A mount showing part of the hierarchy (a container's): our path, less that part.
        ("/sys/fs/cgroup/memory", "/docker/c1", "/docker/c1/k", "/sys/fs/cgroup/memory/k"),
        ("/sys/fs/cgroup/memory", "/docker/c1", "/other/k", "/sys/fs/cgroup/memory/other/k"),
        ("/sys/fs/cgroup/memory", "/", "/XX.slice/k", "/sys/fs/cgroup/memory/XX.slice/k"),
    ],
)
def test_a_cgroup_path_inside_its_mount(point: str, root: str, path: str, found: str) -> None:
    assert mechanism.inside(point, root, path) == Path(found)


def test_our_own_cgroup_v1_dirs() -> None:
    mounts = mechanism.parse_mountinfo(
        HERE_MOUNTINFO
        + "50 31 0:40 / /elsewhere/memory rw - cgroup cgroup rw,memory\n"  # the first counts
        + "51 31 0:41 / /v2 rw - cgroup2 cgroup2 rw,memory,pids\n"  # not v1
    )
    own = mechanism.parse_cgroup(HERE_CGROUP)
    assert mechanism.v1_groups(mounts, own) == {
        "memory": Path("/sys/fs/cgroup/memory/process_api/2757a6bf5b93ea74794360e691c02e1d"),
        "pids": Path("/sys/fs/cgroup/pids"),
    }
    assert mechanism.v1_groups(mounts, {"pids": "/x"}) == {"pids": Path("/sys/fs/cgroup/pids/x")}
    assert mechanism.v1_groups(mounts[-1:], own) == {}
    assert mechanism.v2_groups(mounts, own) == {}  # the unified hierarchy delegates nothing


def test_our_own_cgroup_v2_dir_for_what_it_delegates(tmp_path: Path) -> None:
    group = tmp_path / "user.slice" / "gateway"
    group.mkdir(parents=True)
    (group / "cgroup.subtree_control").write_text("cpu pids\n")
    mounts = [
        ("/sys/fs/cgroup/memory", "cgroup", "/", frozenset({"memory"})),
        (str(tmp_path), "cgroup2", "/", frozenset({"rw"})),
    ]
    assert mechanism.v2_groups(mounts, {"": "/user.slice/gateway"}) == {"pids": group}
    (group / "cgroup.subtree_control").write_text("memory pids")
    both = {"memory": group, "pids": group}
    assert mechanism.v2_groups(mounts, {"": "/user.slice/gateway", "memory": "/"}) == both
    assert mechanism.v2_groups(mounts, {"memory": "/user.slice/gateway"}) == {}  # no v2 line
    assert mechanism.v2_groups(mounts[:1], {"": "/user.slice/gateway"}) == {}


def test_only_dirs_we_may_create_children_in_are_writable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "program").write_text("")
    (tmp_path / "program").chmod(0o755)
    groups = {
        "memory": tmp_path,
        "pids": tmp_path / "missing",
        "cpu": tmp_path / "file",
        "io": tmp_path / "program",  # writable and executable, but no dir
    }
    assert mechanism.writable(groups) == {"memory": tmp_path}
    if os.geteuid() != 0:  # root ignores modes
        tmp_path.chmod(0o500)
        try:
            assert mechanism.writable(groups) == {}
        finally:
            tmp_path.chmod(0o700)


def test_a_file_that_cannot_be_read_reads_as_empty(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("a b\n")
    assert mechanism.read(str(tmp_path / "f")) == "a b\n"
    assert mechanism.read(str(tmp_path / "missing")) == ""
    assert mechanism.read(str(tmp_path)) == ""


@pytest.fixture
def systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A PATH holding a systemd-run, and the environment of a reachable user manager."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemd-run").write_text("#!/bin/sh\n")
    (bin_dir / "systemd-run").chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    runtime = tmp_path / "run"
    (runtime / "systemd").mkdir(parents=True)
    (runtime / "systemd" / "private").write_text("")
    return {"XDG_RUNTIME_DIR": str(runtime)}


UNIFIED = "30 23 0:26 / /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n"


def test_a_delegated_cgroup_v2_dir_is_preferred(tmp_path: Path, systemd: dict[str, str]) -> None:
    group = tmp_path / "user.slice" / "gateway"
    group.mkdir(parents=True)
    (group / "cgroup.subtree_control").write_text("cpu memory pids\n")
    mountinfo = f"41 31 0:38 / {tmp_path} rw,relatime - cgroup2 cgroup2 rw\n"
    host = mechanism.limits_host(mountinfo, "0::/user.slice/gateway\n", env=systemd)
    assert host == LimitsHost(2, {"memory": group, "pids": group})


def test_writable_cgroup_v1_dirs_come_with_systemd_run_when_usable(
    tmp_path: Path, systemd: dict[str, str]
) -> None:
    for controller in ("memory", "pids"):
        (tmp_path / controller / "k").mkdir(parents=True)
    mountinfo = UNIFIED + "".join(
        f"3{i} 31 0:3{i} / {tmp_path / c} rw - cgroup cgroup rw,{c}\n"
        for i, c in enumerate(("memory", "pids"))
    )
    host = mechanism.limits_host(mountinfo, "5:memory:/k\n6:pids:/k\n0::/\n", env=systemd)
    run = str(tmp_path / "bin" / "systemd-run")
    assert host == LimitsHost(
        1, {"memory": tmp_path / "memory/k", "pids": tmp_path / "pids/k"}, run
    )


@pytest.mark.parametrize(
    ("mountinfo", "manager", "on_path", "usable"),
    [
        (UNIFIED, True, True, True),
        (UNIFIED.replace("/sys/fs/cgroup ", "/sys/fs/cgroup/unified "), True, True, False),
        (UNIFIED.replace("cgroup2 cgroup2", "cgroup cgroup"), True, True, False),
        (UNIFIED, False, True, False),
        (UNIFIED, True, False, False),
        (HERE_MOUNTINFO, True, True, False),  # this machine: v1, no user manager
    ],
)
def test_systemd_run_needs_the_unified_hierarchy_and_a_user_manager(
    systemd: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    mountinfo: str,
    manager: bool,
    on_path: bool,
    usable: bool,
) -> None:
    if not on_path:
        monkeypatch.setenv("PATH", str(Path(systemd["XDG_RUNTIME_DIR"]) / "systemd"))
    env = systemd if manager else {}
    host = mechanism.limits_host(mountinfo, "0::/\n", env=env)
    found = str(Path(systemd["XDG_RUNTIME_DIR"]).parent / "bin" / "systemd-run")
    assert host == LimitsHost(None, {}, found if usable else None)


def test_without_text_this_machines_own_is_read(systemd: dict[str, str]) -> None:
    here = mechanism.limits_host(
        mechanism.read("/proc/self/mountinfo"), mechanism.read("/proc/self/cgroup"), env=systemd
    )
    assert mechanism.limits_host(env=systemd) == here


def test_bubblewrap_not_installed_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert mechanism.working_bwrap() == (
        None,
        "bubblewrap is not installed: `apt-get install bubblewrap` (or your distribution's "
        f"bubblewrap package), {OR_NONE}",
    )


@pytest.fixture
def without_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A PATH without bwrap (so the probe runs none), and a probe found afresh for the test."""
    monkeypatch.setenv("PATH", str(tmp_path))
    mechanism.probe.cache_clear()
    yield
    mechanism.probe.cache_clear()


def test_the_probe_without_bwrap(without_bwrap: None) -> None:
    here = mechanism.probe()
    assert here is mechanism.probe()  # found once per process
    problem = mechanism.working_bwrap()[1]
    assert here == Mechanism(
        "Linux", None, problem, landlock.abi_version(), mechanism.limits_host()
    )
    with pytest.raises(SandboxUnavailable, match=r"^bubblewrap is not installed"):
        mechanism.check(sandboxes.rules())
    mechanism.check(unconfined(sandboxes.rules()))
