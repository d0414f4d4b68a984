"""The entry's plan as its shell's arguments, its refusals, its thread and Landlock's scope on
it, the info file and the wait for bwrap's info; no process runs (what only an exec shows:
test_entry.py)."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import bubblewrap, entry, landlock

MiB = 2**20
RULESET = landlock.Ruleset(7, ((Path("/"), landlock.READ),), tcp_ports=(), scopes=True)


def test_the_plan_goes_into_the_shells_arguments_and_the_script_stays_fixed() -> None:
    plan = entry.Plan(
        join_files=["/sys/fs/cgroup/memory/x/cgroup.procs", "/sys/fs/cgroup/pids/x/cgroup.procs"],
        rlimits={"RLIMIT_DATA": (MiB, 2 * MiB)},
        landlock=True,
    )
    assert entry.command(plan, ["/usr/bin/bwrap", "--", "x"]) == [
        *["/bin/sh", "-c", entry.SCRIPT, "loomgate sandbox entry", "2"],
        *["/sys/fs/cgroup/memory/x/cgroup.procs", "/sys/fs/cgroup/pids/x/cgroup.procs"],
        *["1", "-d", "1024", "2048", "/usr/bin/bwrap", "--", "x"],
    ]
    assert "cgroup.procs" not in entry.SCRIPT and "bwrap" not in entry.SCRIPT
    assert repr(plan) == (
        "Plan(['/sys/fs/cgroup/memory/x/cgroup.procs', '/sys/fs/cgroup/pids/x/cgroup.procs'], "
        f"{{'RLIMIT_DATA': ({MiB}, {2 * MiB})}}, landlock=True)"
    )


def test_the_script_joins_and_limits_first_then_execs_in_its_own_process() -> None:
    lines = [line.strip() for line in entry.SCRIPT.splitlines()]
    join = lines.index('*) { echo $$ > "$1"; } 2> /dev/null ||')
    # "<FIFO": the gateway joins it; it waits for the line that says so, and without one
    # (the gateway gone) it exits before anything runs. Opened read-write, then read-only
    # alone: never a blocking open, and the gateway's end alone keeps it from the end.
    wait = lines.index(
        '"<"*) { exec 3<> "${1#<}" 4< "${1#<}" 3>&- && read -r joined <&4; } 2> /dev/null ||'
    )
    assert lines[wait + 1].endswith("exit 1; }") and lines[wait + 2] == "exec 4<&- ;;"
    assert wait < join
    limit = lines.index('ulimit -S "$1" "$2" && ulimit -H "$1" "$3" || exit 1')  # soft first
    assert join < limit < len(lines) - 1 and lines[-1] == 'exec "$@"'
    assert lines.count("shift; n=$((n - 1))") == 1 and "shift 3; n=$((n - 1))" in lines


def test_a_plan_says_what_it_does() -> None:
    plan = entry.Plan(["3"], ruleset=RULESET, drop_capabilities=True)
    assert repr(plan) == (
        f"Plan(['3'], {{}}, landlock=False, ruleset={RULESET!r}, drop_capabilities=True)"
    )
    assert plan.args() == ["1", "3", "0"]


def test_a_plain_plan() -> None:
    plan = entry.Plan()
    assert (plan.join_files, plan.rlimits, plan.landlock) == ((), {}, False)
    assert (plan.ruleset, plan.drop_capabilities) == (None, False)
    assert plan.args() == ["0", "0"] and entry.Plan(rlimits=None).rlimits == {}
    assert entry.command(plan, ["b"]) == ["/bin/sh", "-c", entry.SCRIPT, entry.NAME, "0", "0", "b"]


@pytest.mark.parametrize(
    ("limit", "kib"),
    [(MiB, "1024"), (MiB + 1023, "1024"), (MiB - 1, "1023"), (4 << 30, str(4 << 20)), (0, "0")],
)
def test_a_limit_goes_to_ulimit_in_kib_rounded_down(limit: int, kib: str) -> None:
    plan = entry.Plan(rlimits={"RLIMIT_DATA": (limit, limit)})
    assert plan.args() == ["0", "1", "-d", kib, kib]  # never looser than asked


@pytest.mark.parametrize(
    "rlimits",
    [
        {"RLIMIT_AS": (1, 1)},
        {"RLIMIT_AS": (1, 1), "RLIMIT_DATA": (1, 1)},
        {"RLIMIT_NPROC": (1, 1), "RLIMIT_STACK": (1, 1)},
        {"data": (1, 1)},
    ],
)
def test_an_rlimit_the_shell_does_not_set_is_refused(rlimits: dict[str, tuple[int, int]]) -> None:
    unknown = ", ".join(sorted(set(rlimits) - {"RLIMIT_DATA", "RLIMIT_NPROC"}))
    with pytest.raises(
        entry.PlanError,
        match=f"^the entry cannot set {unknown}: its shell sets RLIMIT_DATA, RLIMIT_NPROC$",
    ):
        entry.Plan(rlimits=rlimits)


@pytest.mark.parametrize(
    ("one", "other", "same"),
    [
        (entry.Plan(["/a"]), entry.Plan(("/a",)), True),
        (entry.Plan(["/a"]), entry.Plan(["/b"]), False),
        (entry.Plan(rlimits={"RLIMIT_DATA": (1, 2)}), entry.Plan(), False),
        (
            entry.Plan(rlimits={"RLIMIT_DATA": (1, 2)}),
            entry.Plan(rlimits={"RLIMIT_DATA": (1, 3)}),
            False,
        ),
        (entry.Plan(landlock=True), entry.Plan(), False),
        (entry.Plan(), ["0", "0"], False),
        (entry.Plan(ruleset=RULESET), entry.Plan(ruleset=RULESET), True),
        (entry.Plan(ruleset=RULESET), entry.Plan(), False),
        (entry.Plan(ruleset=RULESET), entry.Plan(ruleset=landlock.Ruleset(7, ())), False),
        (entry.Plan(drop_capabilities=True), entry.Plan(), False),
    ],
)
def test_plans_are_equal_when_what_they_do_is(one: entry.Plan, other: object, same: bool) -> None:
    assert (one == other) is same


def no_new_privs(task: str = "thread-self") -> str:
    """Return the NoNewPrivs flag of a thread of this process (Landlock sets it)."""
    lines = Path(f"/proc/{task}/status").read_text().splitlines()
    return next(line.split(":")[1].strip() for line in lines if line.startswith("NoNewPrivs:"))


def test_spawn_calls_start_on_a_thread_of_its_own_and_returns_what_it_returns() -> None:
    caller = threading.current_thread()

    def start() -> tuple[str, bool, str]:
        thread = threading.current_thread()
        return thread.name, thread.daemon, no_new_privs()

    # A daemon: a start still under way never holds the gateway's exit.
    seen = entry.spawn(entry.Plan(), start)
    assert seen == (entry.THREAD, True, no_new_privs()) and caller.name != entry.THREAD


def test_spawn_scopes_its_thread_alone() -> None:
    caller = f"self/task/{threading.get_native_id()}"
    before = no_new_privs(caller)
    assert entry.spawn(entry.Plan(landlock=True), no_new_privs) == "1"  # Landlock needs it
    assert no_new_privs(caller) == before  # the caller's thread is as it was


def capabilities(task: str = "thread-self") -> str:
    """Return the effective capabilities of a thread of this process."""
    lines = Path(f"/proc/{task}/status").read_text().splitlines()
    return next(line.split(":")[1].strip() for line in lines if line.startswith("CapEff:"))


def test_spawn_restricts_its_thread_alone_to_a_whole_ruleset(tmp_path: Path) -> None:
    readable, closed = tmp_path / "readable", tmp_path / "closed"
    readable.write_text("yes")
    closed.write_text("no")
    ruleset = landlock.Ruleset(
        landlock.abi_version(), ((readable, landlock.READ_FILE), (Path("/proc"), landlock.READ))
    )
    caller = f"self/task/{threading.get_native_id()}"
    before = capabilities(caller)

    def start() -> tuple[str, str, str]:
        try:
            closed.read_text()
            seen = "read"
        except PermissionError:
            seen = "refused"
        return readable.read_text(), seen, capabilities()

    plan = entry.Plan(ruleset=ruleset, drop_capabilities=True)
    assert entry.spawn(plan, start) == ("yes", "refused", "0000000000000000")
    # The caller's thread (the gateway's others alike) is as it was.
    assert closed.read_text() == "no" and capabilities(caller) == before


def test_spawn_raises_what_start_raised_in_the_callers_thread() -> None:
    def start() -> None:
        raise OSError(2, "no such bwrap")

    with pytest.raises(OSError, match="no such bwrap"):
        entry.spawn(entry.Plan(), start)


def test_the_info_file_is_the_owners_new_and_emptied_and_not_inherited(tmp_path: Path) -> None:
    info = tmp_path / "info.json"
    fd = entry.open_info(info)
    try:
        assert stat.S_IMODE(info.stat().st_mode) == 0o600 and not os.get_inheritable(fd)
        os.write(fd, b'{"child-pid": 7}')
    finally:
        os.close(fd)
    os.close(entry.open_info(info))
    assert info.read_text() == ""


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


def test_every_rlimit_the_shell_does_not_set_is_named() -> None:
    """(Two at once: the table above names one each; a mutant of entry.py lived without it.)"""
    with pytest.raises(entry.PlanError) as refused:
        entry.Plan(rlimits={"RLIMIT_STACK": (1, 1), "RLIMIT_AS": (1, 1)})
    assert str(refused.value) == (
        "the entry cannot set RLIMIT_AS, RLIMIT_STACK: its shell sets RLIMIT_DATA, RLIMIT_NPROC"
    )
