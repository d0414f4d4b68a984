"""The stage before the sandbox's own command, outside it: a thread of its own, restricted first
(Landlock's scopes before bwrap; under Landlock alone its whole ruleset, and no capabilities),
starts `/bin/sh`, which joins the kernel's cgroups, sets its rlimits and execs the command
(bwrap with its info file open, or the kernel itself). No interpreter starts on the way: the
thread is the gateway's, the shell's script is `SCRIPT`."""

from __future__ import annotations

import functools
import json
import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from loomgate.gateway.sandbox.confinement import capabilities, landlock

__all__ = [
    "NAME",
    "SCRIPT",
    "SHELL",
    "Plan",
    "PlanError",
    "command",
    "nproc_flag",
    "read_info",
    "spawn",
]

T = TypeVar("T")

SHELL = "/bin/sh"
NAME = "loomgate sandbox entry"  # the script's $0, which begins the shell's own error lines
# Its arguments: how many cgroup.procs files follow, those files (or "<" and a FIFO from which a
# line comes once the gateway has put the shell in the kernel's cgroups: a shell Landlock holds
# cannot write them. Opened read-write first, so that opening it never blocks, then read-only
# alone: at its end without a line, the gateway gone, the shell runs nothing);
# how many rlimits follow, each as ulimit's flag, soft and hard value; then the command's argv.
# Only what comes from the plan is in the arguments: the text is fixed.
SCRIPT = """\
n=$1; shift
while [ "$n" -gt 0 ]; do
    case $1 in
        "<"*) { exec 3<> "${1#<}" 4< "${1#<}" 3>&- && read -r joined <&4; } 2> /dev/null ||
            { echo "$0: the gateway did not put it in the kernel's cgroups" >&2; exit 1; }
            exec 4<&- ;;
        *) { echo $$ > "$1"; } 2> /dev/null ||
            { echo "$0: cannot join the kernel's cgroup $1" >&2; exit 1; } ;;
    esac
    shift; n=$((n - 1))
done
n=$1; shift
while [ "$n" -gt 0 ]; do
    ulimit -S "$1" "$2" && ulimit -H "$1" "$3" || exit 1
    shift 3; n=$((n - 1))
done
exec "$@"
"""
# The rlimits the shell's `ulimit` sets: its flag and its unit (dash, bash and ash agree on -d,
# in KiB; RLIMIT_NPROC's flag is the shell's own: `nproc_flag()`).
ULIMIT = {"RLIMIT_DATA": ("-d", 1024), "RLIMIT_NPROC": ("", 1)}
NPROC_FLAGS = ("-p", "-u")  # dash's, then bash's and busybox ash's (bash's -p is the pipe size)
FLAG_TIMEOUT = 10.0
THREAD = "loomgate-sandbox-entry"
POLL = 0.002  # seconds between looks at the info file while bwrap starts


class PlanError(ValueError):
    """The plan asks for what the entry cannot do."""


class Plan:
    """What the entry does before the sandbox's command runs: cgroups to join, rlimits, and on
    its thread Landlock's scopes, or a whole Landlock ruleset, and dropping capabilities."""

    def __init__(
        self,
        join_files: Sequence[str] = (),
        rlimits: Mapping[str, tuple[int, int]] | None = None,
        landlock: bool = False,
        *,
        ruleset: landlock.Ruleset | None = None,
        drop_capabilities: bool = False,
    ) -> None:
        # cgroup.procs files the shell's pid goes into (or "<FIFO": the gateway puts it there)
        self.join_files = tuple(join_files)
        self.rlimits = dict(rlimits or {})  # "RLIMIT_DATA": (soft, hard)
        self.landlock = landlock  # scope abstract unix sockets and signals
        self.ruleset = ruleset  # restrict the thread to it (its own scopes included)
        self.drop_capabilities = drop_capabilities
        unknown = sorted(set(self.rlimits) - set(ULIMIT))
        if unknown:
            raise PlanError(
                f"the entry cannot set {', '.join(unknown)}: its shell sets {', '.join(ULIMIT)}"
            )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plan) and self.facts() == other.facts()

    def facts(self) -> tuple[object, ...]:
        """Return what this plan does, for comparing plans."""
        return (
            self.join_files,
            self.rlimits,
            self.landlock,
            self.ruleset,
            self.drop_capabilities,
        )

    def __repr__(self) -> str:
        more = f", ruleset={self.ruleset!r}" if self.ruleset is not None else ""
        more += ", drop_capabilities=True" if self.drop_capabilities else ""
        return f"Plan({list(self.join_files)!r}, {self.rlimits!r}, landlock={self.landlock}{more})"

    def args(self) -> list[str]:
        """Return the plan as the script's arguments, before the command's argv."""
        args = [str(len(self.join_files)), *self.join_files, str(len(self.rlimits))]
        for name, (soft, hard) in self.rlimits.items():
            flag, unit = ULIMIT[name]
            flag = flag or nproc_flag()
            # Rounded down: never a looser limit than asked.
            args += [flag, str(soft // unit), str(hard // unit)]
        return args

    def restrict_thread(self) -> None:
        """Restrict the calling thread as this plan says (what it starts inherits it)."""
        if self.drop_capabilities:
            capabilities.drop_all()
        if self.ruleset is not None:
            landlock.restrict(self.ruleset)
        elif self.landlock:
            landlock.restrict_scopes()


@functools.cache
def nproc_flag(shell: str = SHELL) -> str:
    """Return the flag of `shell`'s `ulimit` that sets RLIMIT_NPROC: the one whose value is
    this process's (dash has -p; bash and busybox ash -u, and bash's -p is the pipe size);
    PlanError when it has none."""
    soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    expected = "unlimited" if soft == resource.RLIM_INFINITY else str(soft)
    for flag in NPROC_FLAGS:
        try:
            done = subprocess.run(
                [shell, "-c", f"ulimit -S {flag}"],
                capture_output=True,
                text=True,
                timeout=FLAG_TIMEOUT,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and done.stdout.strip() == expected:
            return flag
    raise PlanError(f"the entry's shell ({shell}) cannot set RLIMIT_NPROC with ulimit")


def command(plan: Plan, argv: Sequence[str]) -> list[str]:
    """Return the argv that runs the entry with `plan` in front of `argv` (bwrap's, or the
    kernel's own under Landlock alone)."""
    return [SHELL, "-c", SCRIPT, NAME, *plan.args(), *argv]


def spawn(plan: Plan, start: Callable[[], T]) -> T:
    """Return `start()`, called on a thread of its own that the plan restricts first: the
    processes it starts are restricted, the gateway's other threads are not (Landlock and
    capabilities belong to a thread, and a process inherits its creator's). Blocks while
    `start()` runs, as the Popen it wraps would: nothing can cancel a start between its
    process and its caller."""
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            plan.restrict_thread()
            done.append(start())
        except BaseException as error:  # raised again in the caller's thread
            failed.append(error)

    thread = threading.Thread(target=run, name=THREAD, daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return done[0]


def open_info(info_file: str | os.PathLike[str]) -> int:
    """Return a new fd, for writing, on the (emptied) info file bwrap's `--info-fd` fills."""
    return os.open(info_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)


def read_info(info_file: str | os.PathLike[str], timeout: float) -> int:
    """Return the sandbox init's host pid once bwrap has written it into `info_file`;
    TimeoutError when it has not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(info_file) as info:  # noqa: PTH123
                pid = json.load(info)["child-pid"]
        except (OSError, ValueError, KeyError):
            pass  # not written yet, or written in part
        else:
            if isinstance(pid, int) and pid > 0:
                return pid
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"bwrap wrote no sandbox pid into {info_file} within {timeout:g} s: "
                "see the kernel's log for the entry's or bwrap's error"
            )
        time.sleep(POLL)
