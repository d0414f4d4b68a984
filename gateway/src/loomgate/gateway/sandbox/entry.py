"""The stage before bwrap, outside the sandbox: a thread of its own, Landlock-scoped first,
starts `/bin/sh`, which joins the kernel's cgroups, sets its rlimits and execs bwrap with its
info file open. No interpreter starts on the way: the thread is the gateway's, the shell's
script is `SCRIPT`."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from loomgate.gateway.sandbox import landlock

__all__ = ["NAME", "SCRIPT", "SHELL", "Plan", "PlanError", "command", "read_info", "spawn"]

T = TypeVar("T")

SHELL = "/bin/sh"
NAME = "loomgate sandbox entry"  # the script's $0, which begins the shell's own error lines
# Its arguments: how many cgroup.procs files follow, those files; how many rlimits follow, each
# as ulimit's flag, soft and hard value; then bwrap's argv. Only what comes from the plan is in
# the arguments: the text is fixed.
SCRIPT = """\
n=$1; shift
while [ "$n" -gt 0 ]; do
    { echo $$ > "$1"; } 2> /dev/null ||
        { echo "$0: cannot join the kernel's cgroup $1" >&2; exit 1; }
    shift; n=$((n - 1))
done
n=$1; shift
while [ "$n" -gt 0 ]; do
    ulimit -S "$1" "$2" && ulimit -H "$1" "$3" || exit 1
    shift 3; n=$((n - 1))
done
exec "$@"
"""
# The rlimits the shell's `ulimit` sets: its flag and its unit, in bytes (dash, bash, ash agree).
ULIMIT = {"RLIMIT_DATA": ("-d", 1024)}
THREAD = "loomgate-sandbox-entry"
POLL = 0.002  # seconds between looks at the info file while bwrap starts


class PlanError(ValueError):
    """The plan asks for what the entry cannot do."""


class Plan:
    """What the entry does before bwrap runs: cgroups to join, rlimits, Landlock scopes."""

    def __init__(
        self,
        join_files: Sequence[str] = (),
        rlimits: Mapping[str, tuple[int, int]] | None = None,
        landlock: bool = False,
    ) -> None:
        self.join_files = tuple(join_files)  # cgroup.procs files the shell's pid goes into
        self.rlimits = dict(rlimits or {})  # "RLIMIT_DATA": (soft, hard)
        self.landlock = landlock  # scope abstract unix sockets and signals
        unknown = sorted(set(self.rlimits) - set(ULIMIT))
        if unknown:
            raise PlanError(
                f"the entry cannot set {', '.join(unknown)}: its shell sets {', '.join(ULIMIT)}"
            )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plan) and (
            (self.join_files, self.rlimits, self.landlock)
            == (other.join_files, other.rlimits, other.landlock)
        )

    def __repr__(self) -> str:
        return f"Plan({list(self.join_files)!r}, {self.rlimits!r}, landlock={self.landlock})"

    def args(self) -> list[str]:
        """Return the plan as the script's arguments, before bwrap's argv."""
        args = [str(len(self.join_files)), *self.join_files, str(len(self.rlimits))]
        for name, (soft, hard) in self.rlimits.items():
            flag, unit = ULIMIT[name]
            # Rounded down: never a looser limit than asked.
            args += [flag, str(soft // unit), str(hard // unit)]
        return args


def command(plan: Plan, bwrap_argv: Sequence[str]) -> list[str]:
    """Return the argv that runs the entry with `plan` in front of `bwrap_argv`."""
    return [SHELL, "-c", SCRIPT, NAME, *plan.args(), *bwrap_argv]


def spawn(plan: Plan, start: Callable[[], T]) -> T:
    """Return `start()`, called on a thread of its own that the plan's Landlock scopes first:
    the processes it starts are in the scope, the gateway's other threads are not (Landlock
    restricts a thread, and a process inherits its creator's). Blocks while `start()` runs, as
    the Popen it wraps would: nothing can cancel a start between its process and its caller."""
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            if plan.landlock:
                landlock.restrict_scopes()
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
