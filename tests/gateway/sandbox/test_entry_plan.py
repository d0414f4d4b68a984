"""The entry's plan on its command line, its refusals, what it applies to its own process
before bwrap (cgroup joins, rlimits, the info fd) and its wait for bwrap's info; no process
runs (what only an exec shows: test_entry.py)."""

from __future__ import annotations

import contextlib
import os
import resource
import stat
import sys
import threading
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import bubblewrap, entry

MiB = 2**20
USAGE = (
    "^usage: python -I -m loomgate.gateway.sandbox.entry \\[OPTIONS\\] --info FILE -- BWRAP ...$"
)
NOT_AN_OPTION = (
    " is not an entry option \\(--join, --rlimit, --landlock, --info, each but --landlock "
    "with a value\\)$"
)


def test_the_plan_round_trips_through_the_command_line(tmp_path: Path) -> None:
    plan = entry.Plan(
        info_file=tmp_path / "info.json",
        join_files=["/sys/fs/cgroup/memory/x/cgroup.procs", "/sys/fs/cgroup/pids/x/cgroup.procs"],
        rlimits={"RLIMIT_DATA": (MiB, 2 * MiB), "RLIMIT_NPROC": (5, 6)},
        landlock=True,
    )
    argv = entry.command(plan, ["/usr/bin/bwrap", "--", "x"], python="/py")
    assert argv == [
        *["/py", "-I", "-S", "-c", entry.BOOTSTRAP, entry.IMPORT_ROOT],
        *["--join", "/sys/fs/cgroup/memory/x/cgroup.procs"],
        *["--join", "/sys/fs/cgroup/pids/x/cgroup.procs"],
        *["--rlimit", f"RLIMIT_DATA={MiB}:{2 * MiB}", "--rlimit", "RLIMIT_NPROC=5:6"],
        *["--landlock", "--info", str(tmp_path / "info.json"), "--", "/usr/bin/bwrap", "--", "x"],
    ]
    assert entry.Plan.parse(argv[6:]) == (plan, ["/usr/bin/bwrap", "--", "x"])
    assert repr(plan) == f"Plan({' '.join(argv[6:-4])})"


def test_a_plain_plan() -> None:
    plan, bwrap = entry.Plan.parse(["--info", "/i", "--", "b", "--", "c"])
    assert bwrap == ["b", "--", "c"]
    assert (plan.info_file, plan.join_files, plan.rlimits, plan.landlock) == ("/i", (), {}, False)
    assert plan == entry.Plan("/i") and plan.args() == ["--info", "/i"]
    assert entry.Plan("/i", rlimits=None).rlimits == {}
    assert repr(plan) == "Plan(--info /i)"


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        (entry.Plan("/i"), entry.Plan(Path("/i")), True),
        (entry.Plan("/i"), entry.Plan("/j"), False),
        (entry.Plan("/i", ["/a"]), entry.Plan("/i", ["/b"]), False),
        (entry.Plan("/i", rlimits={"RLIMIT_DATA": (1, 2)}), entry.Plan("/i"), False),
        (entry.Plan("/i", landlock=True), entry.Plan("/i"), False),
        (entry.Plan("/i"), ["--info", "/i"], False),
    ],
)
def test_plans_are_equal_when_their_arguments_are(
    one: entry.Plan, other: object, same: bool
) -> None:
    assert (one == other) is same


def test_options_in_any_order_the_last_info_and_rlimit_win() -> None:
    plan, bwrap = entry.Plan.parse(
        [
            *["--rlimit", "RLIMIT_DATA=1:2", "--join", "/a", "--info", "/i", "--landlock"],
            *["--join", "/b", "--info", "/j", "--rlimit", "RLIMIT_DATA=3:4", "--", "b"],
        ]
    )
    assert plan == entry.Plan("/j", ["/a", "/b"], {"RLIMIT_DATA": (3, 4)}, landlock=True)
    assert bwrap == ["b"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--info", "/i"], USAGE),
        (["--info", "/i", "--"], USAGE),
        ([], USAGE),
        (
            ["--", "bwrap"],
            "^the entry needs --info FILE \\(where bwrap writes the sandbox's pid\\)$",
        ),
        (["--info", "--", "bwrap"], "^'--info'" + NOT_AN_OPTION),
        (["--info", "/i", "--join", "--", "bwrap"], "^'--join'" + NOT_AN_OPTION),
        (["--bogus", "x", "--info", "/i", "--", "b"], "^'--bogus'" + NOT_AN_OPTION),
        (["/i", "--", "b"], "^'/i'" + NOT_AN_OPTION),
    ],
)
def test_bad_arguments_are_refused(args: list[str], message: str) -> None:
    with pytest.raises(entry.PlanError, match=message):
        entry.Plan.parse(args)


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("RLIMIT_DATA=1:2", ("RLIMIT_DATA", (1, 2))),
        (f"RLIMIT_AS={4 << 30}:{4 << 30}", ("RLIMIT_AS", (4 << 30, 4 << 30))),
        ("RLIMIT_NPROC=0:0", ("RLIMIT_NPROC", (0, 0))),
    ],
)
def test_an_rlimit(value: str, found: tuple[str, tuple[int, int]]) -> None:
    assert entry.rlimit(value) == found


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("RLIMIT_NOPE=1:1", "names no rlimit: give RLIMIT_NAME=SOFT:HARD$"),
        ("getrlimit=1:1", "names no rlimit"),
        ("RLIM_INFINITY=1:1", "names no rlimit"),  # in `resource`, but no rlimit
        ("=1:1", "names no rlimit"),
        ("RLIMIT_DATA=1", "SOFT and HARD must be byte or count numbers$"),
        ("RLIMIT_DATA=:1", "must be byte or count"),
        ("RLIMIT_DATA=-1:1", "must be byte or count"),
        ("RLIMIT_DATA=1:2x", "must be byte or count"),
        ("RLIMIT_DATA", "must be byte or count"),
    ],
)
def test_a_bad_rlimit_is_refused(value: str, message: str) -> None:
    with pytest.raises(entry.PlanError, match=f"^--rlimit {value!r}: |^--rlimit {value!r} "):
        entry.rlimit(value)
    with pytest.raises(entry.PlanError, match=message):
        entry.rlimit(value)


def test_the_entry_runs_on_this_python_from_this_checkout() -> None:
    assert entry.prefix() == [sys.executable, "-I", "-S", "-c", entry.BOOTSTRAP, entry.IMPORT_ROOT]
    assert Path(entry.IMPORT_ROOT, "loomgate/gateway/sandbox/entry.py") == Path(entry.__file__)
    assert entry.command(entry.Plan("/i"), ["b"])[:6] == entry.prefix()


def no_new_privs() -> str:
    """Return this process's NoNewPrivs flag (Landlock sets it)."""
    lines = Path("/proc/self/status").read_text().splitlines()
    return next(line.split(":")[1].strip() for line in lines if line.startswith("NoNewPrivs:"))


def test_prepare_joins_sets_rlimits_and_opens_the_info_file_for_bwrap(tmp_path: Path) -> None:
    joins = [tmp_path / "memory.procs", tmp_path / "pids.procs"]
    for join in joins:
        join.write_text("")
    info = tmp_path / "info.json"
    info.write_text("the last start's pid, longer than the new")
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    lower = 0 if soft != 0 else 4096
    privs = no_new_privs()
    plan = entry.Plan(info, [str(j) for j in joins], {"RLIMIT_CORE": (lower, hard)})
    fd = entry.prepare(plan)
    try:
        assert [join.read_text() for join in joins] == [str(os.getpid())] * 2
        assert resource.getrlimit(resource.RLIMIT_CORE) == (lower, hard)
        assert no_new_privs() == privs  # no Landlock asked for
        assert os.get_inheritable(fd)
        os.write(fd, b'{"child-pid": 7}')
        assert info.read_text() == '{"child-pid": 7}'
        assert stat.S_IMODE(info.stat().st_mode) == 0o644  # kept; a new one is the owner's:
    finally:
        os.close(fd)
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
    info.unlink()
    os.close(entry.prepare(entry.Plan(info)))
    assert stat.S_IMODE(info.stat().st_mode) == 0o600 and info.read_text() == ""


def test_a_cgroup_that_cannot_be_joined_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "gone" / "cgroup.procs"
    with pytest.raises(OSError, match=f"^cannot join the kernel's cgroup {missing}: No such file"):
        entry.prepare(entry.Plan(tmp_path / "info.json", [str(missing)]))
    assert not (tmp_path / "info.json").exists()


# No argv here names a program that runs: a step skipped must not exec this test's process away.
NOWHERE = "/nonexistent/true"


def fds_open_on(path: Path) -> list[int]:
    """Return this process's fds open on `path`."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # the listing's own fd is gone by now
            if fd.readlink() == path:
                found.append(int(fd.name))
    return found


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        (["--", NOWHERE], 2, "the entry needs --info FILE"),
        (
            ["--rlimit", "RLIMIT_NOPE=1:1", "--info", "INFO", "--", NOWHERE],
            2,
            "--rlimit 'RLIMIT_NOPE=1:1' names no",
        ),
        (
            ["--join", "/nonexistent/cgroup.procs", "--info", "INFO", "--", NOWHERE],
            1,
            "cannot join the kernel's cgroup /nonexistent/cgroup.procs: No such file",
        ),
        (
            ["--info", "INFO", "--", "/nonexistent/bwrap", "--x"],
            1,
            "cannot run /nonexistent/bwrap: No such file or directory",
        ),
        # One that is there, but no program: its error, not that of a word after it.
        (["--info", "INFO", "--", "PLAIN", NOWHERE], 1, "cannot run PLAIN: Permission denied"),
    ],
)
def test_errors_before_exec_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], status: int, says: str
) -> None:
    info, plain = tmp_path / "info.json", tmp_path / "plain"
    plain.write_text("")
    named = {"INFO": str(info), "PLAIN": str(plain)}
    code = entry.main([named.get(a, a) for a in args])
    opened = fds_open_on(info)
    for fd in opened:  # the info fd a failed exec leaves (the entry then exits)
        os.close(fd)
    err = capsys.readouterr().err
    assert code == status
    says = says.replace("PLAIN", str(plain))
    assert err.count("\n") == 1 and err.startswith(f"loomgate sandbox entry: {says}"), err
    # Only an exec that failed had the plan applied first: its info fd open for bwrap.
    assert len(opened) == (1 if "cannot run" in says else 0)


@pytest.mark.parametrize(
    "text", ["", "{", '{"child-pid": 0}', '{"child-pid": -3}', '{"child-pid": "5"}', '{"o": 5}']
)
def test_read_info_waits_for_a_pid(tmp_path: Path, text: str) -> None:
    info = tmp_path / "info.json"
    info.write_text(text)
    with pytest.raises(TimeoutError) as refused:
        entry.read_info(info, 0.05)
    assert str(refused.value) == (
        f"bwrap wrote no sandbox pid into {info} within 0.05 s: see the kernel's log for the "
        "entry's or bwrap's error"
    )


def test_read_info_returns_the_init_pid(tmp_path: Path) -> None:
    info = bubblewrap.info_file(tmp_path)
    info.write_text('{\n    "child-pid": 4242\n}\n')
    assert entry.read_info(info, 0) == 4242
    info.write_text('{"child-pid": 1}')
    assert entry.read_info(str(info), 0) == 1


def test_read_info_waits_until_bwrap_writes(tmp_path: Path) -> None:
    info = tmp_path / "info.json"
    writer = threading.Timer(0.1, info.write_text, ['{"child-pid": 77}'])
    writer.start()
    try:
        assert entry.read_info(info, 30) == 77
    finally:
        writer.join()
