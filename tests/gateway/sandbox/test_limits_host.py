"""Where this machine can put kernels' limits: the cgroups found from real mountinfo and cgroup
text, a systemd-run with a user manager, else rlimits; no process runs (the limits themselves:
test_limits.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import limits
from loomgate.gateway.sandbox.confinement.limits import LimitsHost
from loomgate.gateway.sandbox.policy.profiles import SandboxRules
from tests.gateway.sandbox import sandboxes

V1 = LimitsHost(1, {"memory": Path("/m"), "pids": Path("/p")})
V1_MEMORY_ONLY = LimitsHost(1, {"memory": Path("/m")})
V2 = LimitsHost(2, {"memory": Path("/g"), "pids": Path("/g")})
SCOPE = LimitsHost(None, {}, "/usr/bin/systemd-run")
NOWHERE = LimitsHost()
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


@pytest.mark.parametrize(
    ("host", "rules", "how"),
    [
        (V1, sandboxes.rules(), "none"),
        (NOWHERE, sandboxes.rules(), "none"),
        (V1, sandboxes.rules(memory=1), "cgroup v1"),
        (V1, sandboxes.rules(processes=1), "cgroup v1"),
        (V2, sandboxes.rules(memory=1, processes=1), "cgroup v2"),
        (LimitsHost(None, {"memory": Path("/m")}), sandboxes.rules(memory=1), "rlimits"),
        (V1_MEMORY_ONLY, sandboxes.rules(memory=1, processes=1), "rlimits"),
        (NOWHERE, sandboxes.rules(processes=1), "rlimits"),
        (LimitsHost(None, {"pids": Path("/p")}), sandboxes.rules(memory=1, processes=1), "rlimits"),
        (LimitsHost(2, {"pids": Path("/g")}), sandboxes.rules(processes=1), "cgroup v2"),
        (LimitsHost(2, {"pids": Path("/g")}), sandboxes.rules(memory=1), "rlimits"),
        (SCOPE, sandboxes.rules(memory=1, processes=1), "systemd scope"),
    ],
)
def test_limits_mechanism(host: LimitsHost, rules: SandboxRules, how: str) -> None:
    assert limits.limits_mechanism(host, rules) == how


def test_cgroup_mounts_are_read_from_mountinfo() -> None:
    assert limits.parse_mountinfo(HERE_MOUNTINFO) == [
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
    assert limits.parse_mountinfo(f"{line}\n{good}\n") == [
        ("/sys/fs/cgroup/unified", "cgroup2", "/sub", frozenset({"rw", "nsdelegate"}))
    ]


def test_our_own_cgroups_are_read_per_controller() -> None:
    text = HERE_CGROUP + "5:cpuset,cpuacct:/a:b\nnot a line\n7:blkio\n"
    assert limits.parse_cgroup(text) == {
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
    assert limits.inside(point, root, path) == Path(found)


def test_our_own_cgroup_v1_dirs() -> None:
    mounts = limits.parse_mountinfo(
        HERE_MOUNTINFO
        + "50 31 0:40 / /elsewhere/memory rw - cgroup cgroup rw,memory\n"  # the first counts
        + "51 31 0:41 / /v2 rw - cgroup2 cgroup2 rw,memory,pids\n"  # not v1
    )
    own = limits.parse_cgroup(HERE_CGROUP)
    assert limits.v1_groups(mounts, own) == {
        "memory": Path("/sys/fs/cgroup/memory/process_api/2757a6bf5b93ea74794360e691c02e1d"),
        "pids": Path("/sys/fs/cgroup/pids"),
    }
    assert limits.v1_groups(mounts, {"pids": "/x"}) == {"pids": Path("/sys/fs/cgroup/pids/x")}
    assert limits.v1_groups(mounts[-1:], own) == {}
    assert limits.v2_groups(mounts, own) == {}  # the unified hierarchy delegates nothing


def test_our_own_cgroup_v2_dir_for_what_it_delegates(tmp_path: Path) -> None:
    group = tmp_path / "user.slice" / "gateway"
    group.mkdir(parents=True)
    (group / "cgroup.subtree_control").write_text("cpu pids\n")
    mounts = [
        ("/sys/fs/cgroup/memory", "cgroup", "/", frozenset({"memory"})),
        (str(tmp_path), "cgroup2", "/", frozenset({"rw"})),
    ]
    assert limits.v2_groups(mounts, {"": "/user.slice/gateway"}) == {"pids": group}
    (group / "cgroup.subtree_control").write_text("memory pids")
    both = {"memory": group, "pids": group}
    assert limits.v2_groups(mounts, {"": "/user.slice/gateway", "memory": "/"}) == both
    assert limits.v2_groups(mounts, {"memory": "/user.slice/gateway"}) == {}  # no v2 line
    assert limits.v2_groups(mounts[:1], {"": "/user.slice/gateway"}) == {}


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
    assert limits.writable(groups) == {"memory": tmp_path}
    if os.geteuid() != 0:  # root ignores modes
        tmp_path.chmod(0o500)
        try:
            assert limits.writable(groups) == {}
        finally:
            tmp_path.chmod(0o700)


def test_a_file_that_cannot_be_read_reads_as_empty(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("a b\n")
    assert limits.read(str(tmp_path / "f")) == "a b\n"
    assert limits.read(str(tmp_path / "missing")) == ""
    assert limits.read(str(tmp_path)) == ""


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
    host = limits.limits_host(mountinfo, "0::/user.slice/gateway\n", env=systemd)
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
    host = limits.limits_host(mountinfo, "5:memory:/k\n6:pids:/k\n0::/\n", env=systemd)
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
    host = limits.limits_host(mountinfo, "0::/\n", env=env)
    found = str(Path(systemd["XDG_RUNTIME_DIR"]).parent / "bin" / "systemd-run")
    assert host == LimitsHost(None, {}, found if usable else None)


def test_without_text_this_machines_own_is_read(systemd: dict[str, str]) -> None:
    here = limits.limits_host(
        limits.read("/proc/self/mountinfo"), limits.read("/proc/self/cgroup"), env=systemd
    )
    assert limits.limits_host(env=systemd) == here


@pytest.mark.parametrize(
    ("host", "offers"),
    [
        (V1, "cgroup v1"),
        (V2, "cgroup v2"),
        (V1_MEMORY_ONLY, "rlimits"),
        (SCOPE, "systemd scope"),
        (LimitsHost(1, {"memory": Path("/m")}, "/usr/bin/systemd-run"), "systemd scope"),
        (NOWHERE, "rlimits"),
    ],
)
def test_what_a_host_offers_any_profile(host: LimitsHost, offers: str) -> None:
    assert host.offers() == offers
