"""A kernel's limits without a process: the cgroup files written into plain dirs that stand in
for the cgroups (v1 and v2), the memory limit's kills read back, removal, a failed creation
undone, the systemd scope's argv and the JSON a later gateway reads (real cgroups, kills and
held fork loops: test_limits.py, whose tests all count as starting processes)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import limits as limits_module
from loomgate.gateway.sandbox.confinement.limits import (
    NPROC_ROOT,
    NPROC_WEAKER,
    KernelLimits,
    LimitsHost,
    limits_lacks,
)
from tests.gateway.sandbox import sandboxes

MiB = 2**20
NOWHERE = LimitsHost()
SCOPE = LimitsHost(None, {}, "/opt/bin/systemd-run")


def stand_in(tmp_path: Path, version: int) -> LimitsHost:
    """Return a host whose memory and pids cgroups are plain dirs under `tmp_path`."""
    if version == 2:
        return LimitsHost(2, {"memory": tmp_path, "pids": tmp_path})
    (tmp_path / "memory").mkdir()
    (tmp_path / "pids").mkdir()
    return LimitsHost(1, {"memory": tmp_path / "memory", "pids": tmp_path / "pids"})


# Each case: the host's version, a file the group already holds (as the kernel makes it in a
# real cgroup), the memory and processes limits, and the files written (None: not written).
FILES = [
    ("v1 without swap accounting", 1, None, MiB, 7,
     {"memory/loomgate-k/memory.limit_in_bytes": str(MiB), "memory/loomgate-k/memory.swappiness":
      "0", "memory/loomgate-k/memory.memsw.limit_in_bytes": None,
      "pids/loomgate-k/pids.max": "7"}),
    ("v1 with swap accounting", 1, "memory/loomgate-k/memory.memsw.limit_in_bytes", MiB, None,
     {"memory/loomgate-k/memory.limit_in_bytes": str(MiB),
      "memory/loomgate-k/memory.memsw.limit_in_bytes": str(MiB),
      "memory/loomgate-k/memory.swappiness": None, "pids/loomgate-k": None}),
    ("v1 processes only", 1, None, None, 3,
     {"pids/loomgate-k/pids.max": "3", "memory/loomgate-k": None}),
    ("v2 without swap", 2, None, 2 * MiB, 5,
     {"loomgate-k/memory.max": str(2 * MiB), "loomgate-k/memory.swap.max": None,
      "loomgate-k/pids.max": "5"}),
    ("v2 with swap", 2, "loomgate-k/memory.swap.max", 2 * MiB, None,
     {"loomgate-k/memory.max": str(2 * MiB), "loomgate-k/memory.swap.max": "0",
      "loomgate-k/pids.max": None}),
    ("v2 processes only", 2, None, None, 4,
     {"loomgate-k/pids.max": "4", "loomgate-k/memory.max": None}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "version", "there", "memory", "processes", "files"), FILES, ids=[c[0] for c in FILES]
)
def test_the_cgroup_files_a_kernels_limits_write(
    tmp_path: Path,
    case: str,
    version: int,
    there: str | None,
    memory: int | None,
    processes: int | None,
    files: dict[str, str | None],
) -> None:
    host = stand_in(tmp_path, version)
    if there is not None:
        (tmp_path / there).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / there).write_text("")
    limits = KernelLimits.create("k", sandboxes.rules(memory=memory, processes=processes), host)
    assert limits.mechanism == f"cgroup v{version}"
    for name, value in files.items():
        path = tmp_path / name
        assert (path.read_text() if path.exists() else None) == value, name
    groups = dict.fromkeys(limits.groups.values())  # v2: one group holds both controllers
    assert limits.join_files == [str(group / "cgroup.procs") for group in groups]


# What the memory limit's counter file says before the kernel starts and after, per version.
COUNTERS = [
    (1, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
     "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 2),
    (2, "memory.events", "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",
     "low 0\nhigh 0\nmax 9\noom 2\noom_kill 2\n", 1),
]  # fmt: skip


@pytest.mark.parametrize(("version", "name", "before", "after", "kills"), COUNTERS)
def test_the_memory_limits_kills_count_from_this_start(
    tmp_path: Path, version: int, name: str, before: str, after: str, kills: int
) -> None:
    host = stand_in(tmp_path, version)
    group = host.cgroups["memory"] / "loomgate-k"
    group.mkdir()
    (group / name).write_text(before)  # a crashed gateway's group for this id: taken over
    limits = KernelLimits.create("k", sandboxes.rules(memory=MiB), host)
    assert (limits.oom_kills, limits.memory_kills(), limits.memory_killed()) == (
        kills,
        kills,
        False,
    )
    (group / name).write_text(after)
    assert (limits.memory_kills(), limits.memory_killed()) == (kills + 1, True)
    taken_back = KernelLimits.from_json(limits.to_json())
    assert taken_back.memory_killed()
    (group / name).unlink()  # the group is gone: no counter
    assert (limits.memory_kills(), limits.memory_killed()) == (0, False)


@pytest.mark.parametrize(
    ("mechanism", "controller"),
    [("cgroup v1", "pids"), ("cgroup v2", "pids"), ("rlimits", "memory"), ("none", "memory")],
)
def test_no_memory_group_no_kills(tmp_path: Path, mechanism: str, controller: str) -> None:
    (tmp_path / "memory.events").write_text("oom_kill 5\n")
    (tmp_path / "memory.oom_control").write_text("oom_kill 5\n")
    limits = KernelLimits("k", mechanism, groups={controller: tmp_path})
    assert (limits.memory_kills(), limits.memory_killed()) == (0, False)


def test_a_creation_that_fails_leaves_no_group(tmp_path: Path) -> None:
    (tmp_path / "memory").mkdir()
    host = LimitsHost(1, {"memory": tmp_path / "memory", "pids": tmp_path / "gone"})
    with pytest.raises(FileNotFoundError):
        KernelLimits.create("k", sandboxes.rules(memory=MiB, processes=5), host)
    assert list((tmp_path / "memory").iterdir()) == []


def test_remove_takes_each_group_once_and_twice_is_harmless(tmp_path: Path) -> None:
    limits = KernelLimits.create(
        "k", sandboxes.rules(memory=MiB, processes=5), stand_in(tmp_path, 2)
    )
    group = tmp_path / "loomgate-k"
    for name in ("memory.max", "pids.max"):  # a real cgroup's files go with its dir
        (group / name).unlink()
    assert limits.remove() is True and not group.exists()
    assert limits.remove() is True


def test_remove_raises_what_is_not_a_busy_cgroup(tmp_path: Path) -> None:
    limits = KernelLimits.create("k", sandboxes.rules(processes=5), stand_in(tmp_path, 2))
    with pytest.raises(OSError) as failed:  # a plain dir holding files is not empty
        limits.remove(timeout=0)
    assert failed.value.errno == errno.ENOTEMPTY


@pytest.mark.parametrize(
    ("memory", "processes", "properties"),
    [
        (MiB, None, ["-p", f"MemoryMax={MiB}", "-p", "MemorySwapMax=0"]),
        (None, 9, ["-p", "TasksMax=9"]),
    ],
)
def test_a_systemd_scope_holds_the_limits_the_rules_have(
    memory: int | None, processes: int | None, properties: list[str]
) -> None:
    host = LimitsHost(None, {}, "/opt/bin/systemd-run")
    limits = KernelLimits.create("k9", sandboxes.rules(memory=memory, processes=processes), host)
    assert limits.prefix == [
        "/opt/bin/systemd-run",
        "--user",
        "--scope",
        "--quiet",
        "--unit=loomgate-k9.scope",
        *properties,
        "--",
    ]
    assert limits.unit == "loomgate-k9.scope"


def test_limits_as_json_and_back() -> None:
    limits = KernelLimits(
        "k",
        "cgroup v1",
        groups={"memory": Path("/m/loomgate-k"), "pids": Path("/p/loomgate-k")},
        rlimits={"RLIMIT_NPROC": (5, 6)},
        prefix=["/x/systemd-run", "--"],
        oom_kills=3,
    )
    assert limits.to_json() == {
        "kernel_id": "k",
        "mechanism": "cgroup v1",
        "groups": {"memory": "/m/loomgate-k", "pids": "/p/loomgate-k"},
        "rlimits": {"RLIMIT_NPROC": [5, 6]},
        "prefix": ["/x/systemd-run", "--"],
        "oom_kills": 3,
    }
    assert KernelLimits.from_json(limits.to_json()) == limits
    # What an older gateway wrote: only the id and the mechanism.
    assert KernelLimits.from_json({"kernel_id": "k", "mechanism": "none"}) == KernelLimits(
        "k", "none"
    )


def test_a_kernel_id_is_refused_with_what_to_use() -> None:
    with pytest.raises(ValueError) as refused:
        KernelLimits.create("a/b", sandboxes.rules(memory=MiB), LimitsHost())
    assert str(refused.value) == (
        "kernel id 'a/b' cannot name a cgroup: use letters, digits, '_', '-', '.'"
    )


def test_a_counter_file_without_the_line_counts_none(tmp_path: Path) -> None:
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")  # Linux<4.13
    limits = KernelLimits("k", "cgroup v1", groups={"memory": tmp_path})
    assert limits.memory_kills() == 0


@pytest.mark.parametrize(
    ("memory", "processes", "rlimits"),
    [
        (MiB, None, {"RLIMIT_DATA": (MiB, MiB)}),
        (None, 5, {"RLIMIT_NPROC": (5, 5)}),
        (3 * MiB, 7, {"RLIMIT_DATA": (3 * MiB, 3 * MiB), "RLIMIT_NPROC": (7, 7)}),
    ],
)
def test_without_cgroups_or_systemd_the_limits_are_rlimits(
    memory: int | None, processes: int | None, rlimits: dict[str, tuple[int, int]]
) -> None:
    limits = KernelLimits.create("k", sandboxes.rules(memory=memory, processes=processes), NOWHERE)
    assert (limits.mechanism, limits.rlimits, limits.prefix, limits.groups) == (
        "rlimits",
        rlimits,
        [],
        {},
    )


@pytest.mark.parametrize("host", [NOWHERE, SCOPE], ids=["rlimits", "systemd scope"])
def test_limits_elsewhere_set_no_rlimits_for_what_the_rules_leave_out(host: LimitsHost) -> None:
    limits = KernelLimits.create("k", sandboxes.rules(processes=5), host)
    assert "RLIMIT_DATA" not in limits.rlimits
    limits = KernelLimits.create("k", sandboxes.rules(memory=MiB), host)
    assert "RLIMIT_NPROC" not in limits.rlimits
    if host is SCOPE:
        assert limits.rlimits == {}


@pytest.mark.parametrize(("uid", "lacks"), [(1000, [NPROC_WEAKER]), (0, [NPROC_ROOT])])
def test_what_processes_by_rlimit_lack_for_whom(uid: int, lacks: list[str]) -> None:
    assert limits_lacks("rlimits", sandboxes.rules(processes=5), uid) == lacks
    assert limits_lacks("rlimits", None, uid) == lacks


class Calls:
    """A stand-in for systemctl: the calls made, and what `show` answers."""

    def __init__(self, result: str) -> None:
        self.result = result
        self.made: list[tuple[list[str], tuple[str, ...]]] = []

    def __call__(self, prefix: list[str], *args: str) -> str:
        self.made.append((prefix, args))
        return self.result if args[0] == "show" else ""


@pytest.mark.parametrize(
    ("result", "killed"), [("oom-kill", True), ("success", False), ("", False)]
)
def test_a_systemd_scope_asks_systemd_what_ended_it(
    monkeypatch: pytest.MonkeyPatch, result: str, killed: bool
) -> None:
    calls = Calls(result)
    monkeypatch.setattr(limits_module, "systemctl", calls)
    scope = KernelLimits.create("k9", sandboxes.rules(memory=MiB), SCOPE)
    assert scope.memory_killed() is killed
    assert scope.remove() is True
    assert calls.made == [
        (scope.prefix, ("show", "--property=Result", "--value", "loomgate-k9.scope")),
        (scope.prefix, ("reset-failed", "loomgate-k9.scope")),
    ]


def test_only_a_systemd_scope_asks_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = Calls("oom-kill")
    monkeypatch.setattr(limits_module, "systemctl", calls)
    for made in (KernelLimits("k", "rlimits"), KernelLimits("k", "none")):
        assert not made.memory_killed() and made.remove()
    assert calls.made == []


class BusyGroup:
    """A cgroup whose last processes are still exiting: rmdir() says EBUSY `busy` times."""

    def __init__(self, busy: int) -> None:
        self.busy = busy
        self.removed = False

    def rmdir(self) -> None:
        if self.busy > 0:
            self.busy -= 1
            raise OSError(errno.EBUSY, "Device or resource busy")
        self.removed = True


def test_remove_waits_for_a_busy_group_to_empty() -> None:
    group = BusyGroup(busy=3)
    both: dict[str, Path] = {"memory": group, "pids": group}  # type: ignore[dict-item]
    limits = KernelLimits("k", "cgroup v2", groups=both)
    assert limits.remove(timeout=30) is True
    assert group.removed and group.busy == 0


def test_remove_gives_up_on_a_group_that_stays_busy() -> None:
    group = BusyGroup(busy=10**9)
    limits = KernelLimits("k", "cgroup v1", groups={"pids": group})  # type: ignore[dict-item]
    assert limits.remove(timeout=0) is False
    assert not group.removed
