"""A kernel's limits: real cgroup v1 groups here (a memory kill, a held fork loop, removal),
and the cgroup v2 files, systemd scope command and rlimits (RLIMIT_NPROC for processes, said as
weaker) other machines get."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement.limits import (
    NPROC_ROOT,
    NPROC_WEAKER,
    KernelLimits,
    LimitsHost,
    limits_host,
    limits_lacks,
)
from tests.gateway.sandbox import sandboxes

MiB = 2**20
JOIN = "import os, sys\nfor f in sys.argv[1:]:\n    open(f, 'w').write(str(os.getpid()))\n"
ALLOCATE = JOIN + "x = []\nwhile True:\n    x.append(bytearray(MiB))\n".replace("MiB", str(MiB))
FORK_LOOP = (
    JOIN
    + r"""
import errno, json, os
read, write = os.pipe()
children, failure = [], None
while len(children) < 200:
    try:
        pid = os.fork()
    except OSError as e:
        failure = errno.errorcode[e.errno]
        break
    if pid == 0:
        os.close(write)
        os.read(read, 1)
        os._exit(0)
    children.append(pid)
os.close(write)
for pid in children:
    os.waitpid(pid, 0)
print(json.dumps({"children": len(children), "failure": failure}))
"""
)


@pytest.fixture
def made() -> Iterator[list[KernelLimits]]:
    """Limits the test creates; each is removed after it, with any process left in it."""
    created: list[KernelLimits] = []
    yield created
    for limits in created:
        for group in limits.groups.values():
            procs = group / "cgroup.procs"
            for pid in procs.read_text().split() if procs.exists() else ():
                os.kill(int(pid), signal.SIGKILL)  # only processes this test put there
        assert limits.remove()
        assert not any(group.exists() for group in limits.groups.values())


def create(
    made: list[KernelLimits],
    memory: int | None = None,
    processes: int | None = None,
    host: LimitsHost | None = None,
) -> KernelLimits:
    """Create limits for a fresh kernel id, removed after the test."""
    rules = sandboxes.rules(memory=memory, processes=processes)
    here = host if host is not None else limits_host()
    limits = KernelLimits.create(f"test-{uuid.uuid4().hex[:12]}", rules, here)
    made.append(limits)
    return limits


def run_in(limits: KernelLimits, payload: str) -> subprocess.CompletedProcess[str]:
    """Run a python payload that joins `limits`' cgroups first."""
    return subprocess.run(
        [sys.executable, "-c", payload, *limits.join_files],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_memory_limit_kills_and_says_so(made: list[KernelLimits]) -> None:
    limits = create(made, memory=64 * MiB, processes=50)
    assert limits.mechanism == "cgroup v1" and not limits.memory_killed()
    memory = limits.groups["memory"]
    assert int((memory / "memory.limit_in_bytes").read_text()) == 64 * MiB
    if (memory / "memory.memsw.limit_in_bytes").exists():
        assert int((memory / "memory.memsw.limit_in_bytes").read_text()) == 64 * MiB
    done = run_in(limits, ALLOCATE)
    assert done.returncode == -signal.SIGKILL
    assert limits.memory_killed()
    assert KernelLimits.from_json(json.loads(json.dumps(limits.to_json()))).memory_killed()


def test_a_fork_loop_is_held_by_the_processes_limit(made: list[KernelLimits]) -> None:
    limits = create(made, processes=20)
    assert set(limits.groups) == {"pids"}
    assert (limits.groups["pids"] / "pids.max").read_text().strip() == "20"
    done = run_in(limits, FORK_LOOP)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"children": 19, "failure": "EAGAIN"}
    assert not limits.memory_killed()
    assert subprocess.run(["true"], check=False).returncode == 0  # the machine is fine


def test_remove_waits_for_the_processes_and_is_idempotent(made: list[KernelLimits]) -> None:
    limits = create(made, memory=256 * MiB, processes=10)
    sleeper = subprocess.Popen(
        [sys.executable, "-c", JOIN + "import time\ntime.sleep(60)", *limits.join_files]
    )
    try:
        files = [Path(f) for f in limits.join_files]
        deadline = time.monotonic() + 30
        while not all(str(sleeper.pid) in f.read_text().split() for f in files):
            assert sleeper.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        assert limits.remove(timeout=0.1) is False  # a process is still in it
        assert all(group.exists() for group in limits.groups.values())
    finally:
        sleeper.kill()
        sleeper.wait()
    assert limits.remove() is True
    assert limits.remove() is True
    assert not any(group.exists() for group in limits.groups.values())


def test_groups_lie_under_our_own_cgroup_per_controller(made: list[KernelLimits]) -> None:
    limits = create(made, memory=MiB * 100, processes=5)
    for controller, group in limits.groups.items():
        assert group.parent == limits_host().cgroups[controller]
        assert group.name == f"loomgate-{limits.kernel_id}"
    assert limits.join_files == [str(g / "cgroup.procs") for g in limits.groups.values()]


def test_cgroup_v2_files(tmp_path: Path, made: list[KernelLimits]) -> None:
    # The v2 files, in a plain dir standing for a delegated group (not a cgroup here).
    host = LimitsHost(2, {"memory": tmp_path, "pids": tmp_path})
    limits = KernelLimits("k2", "cgroup v2")
    limits.make_groups(host, sandboxes.rules(memory=3 * MiB, processes=7))
    group = tmp_path / "loomgate-k2"
    assert limits.groups == {"memory": group, "pids": group}
    assert limits.join_files == [str(group / "cgroup.procs")]
    assert (group / "memory.max").read_text() == str(3 * MiB)
    assert (group / "pids.max").read_text() == "7"
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 1\noom_kill 0\n")
    assert not limits.memory_killed()
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\n")
    assert limits.memory_killed()


def test_systemd_scope_command() -> None:
    host = LimitsHost(None, {}, "/usr/bin/systemd-run")
    limits = KernelLimits.create("k3", sandboxes.rules(memory=MiB, processes=9), host)
    assert limits.mechanism == "systemd scope" and limits.join_files == []
    assert limits.prefix == [
        "/usr/bin/systemd-run",
        "--user",
        "--scope",
        "--quiet",
        "--unit=loomgate-k3.scope",
        "-p",
        f"MemoryMax={MiB}",
        "-p",
        "MemorySwapMax=0",
        "-p",
        "TasksMax=9",
        "--",
    ]
    assert KernelLimits.from_json(limits.to_json()) == limits


@pytest.mark.parametrize(
    ("memory", "processes", "mechanism", "rlimits"),
    [
        (MiB, None, "rlimits", {"RLIMIT_DATA": (MiB, MiB)}),
        (None, 5, "rlimits", {"RLIMIT_NPROC": (5, 5)}),
        (MiB, 7, "rlimits", {"RLIMIT_DATA": (MiB, MiB), "RLIMIT_NPROC": (7, 7)}),
        (None, None, "none", {}),
    ],
)
def test_without_cgroups_the_limits_are_rlimits(
    memory: int | None, processes: int | None, mechanism: str, rlimits: dict[str, tuple[int, int]]
) -> None:
    limits = KernelLimits.create(
        "k4", sandboxes.rules(memory=memory, processes=processes), LimitsHost()
    )
    assert (limits.mechanism, limits.rlimits, limits.join_files) == (mechanism, rlimits, [])
    assert not limits.memory_killed() and limits.remove()
    assert KernelLimits.from_json(limits.to_json()) == limits


@pytest.mark.parametrize(
    ("how", "processes", "uid", "lacks"),
    [
        ("rlimits", 5, 1000, [NPROC_WEAKER]),
        ("rlimits", 5, 0, [NPROC_ROOT]),
        ("rlimits", None, 1000, []),  # memory alone: RLIMIT_DATA holds it as a cgroup would not
        ("cgroup v1", 5, 1000, []),
        ("cgroup v2", 5, 0, []),
        ("systemd scope", 5, 1000, []),
        ("none", None, 1000, []),
    ],
)
def test_processes_by_rlimit_are_said_as_weaker(
    how: str, processes: int | None, uid: int, lacks: list[str]
) -> None:
    assert limits_lacks(how, sandboxes.rules(processes=processes), uid) == lacks
    # For any profile (rules unknown), what a host offers says as much.
    assert limits_lacks(how, None, uid) == ([] if how != "rlimits" else lacks or [NPROC_WEAKER])
    assert NPROC_WEAKER == "processes held by RLIMIT_NPROC, which counts every process of your user"


@pytest.mark.parametrize("kernel_id", ["", "../escape", "a/b", "-x", "a" * 200])
def test_a_kernel_id_that_cannot_name_a_cgroup_is_refused(kernel_id: str) -> None:
    with pytest.raises(ValueError, match="cannot name a cgroup"):
        KernelLimits.create(kernel_id, sandboxes.rules(memory=MiB), LimitsHost())
