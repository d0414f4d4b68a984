"""The stage before bwrap, outside the sandbox: `python -I -m loomgate.gateway.sandbox.entry
[--join FILE]... [--rlimit NAME=SOFT:HARD]... [--landlock] --info FILE -- BWRAP_ARGV...` joins
the kernel's cgroups, sets its rlimits, applies Landlock scopes, opens bwrap's info file and
execs bwrap. The gateway runs it through `command()`, without `site` and `runpy`. On the start
path: stdlib modules that cost nothing to import, and landlock."""

from __future__ import annotations

import os
import resource
import sys
import time

from loomgate.gateway.sandbox import landlock

TYPE_CHECKING = False
if TYPE_CHECKING:  # collections.abc would cost the entry an import
    from collections.abc import Mapping, Sequence

__all__ = ["Plan", "PlanError", "command", "main", "prefix", "read_info"]

MODULE = "loomgate.gateway.sandbox.entry"
# What `command()` runs: `python -I -S` imports no `site` (and so no .pth files, sitecustomize or
# site-packages), and `-c` needs no runpy; the one dir this package is imported from comes
# first in its arguments.
BOOTSTRAP = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    f"from {MODULE} import main; sys.exit(main(sys.argv[1:]))"
)
# The dir `loomgate` is imported from, 4 levels above this loomgate/gateway/sandbox/entry.py
# (pathlib would cost the entry an import).
IMPORT_ROOT = __file__.rsplit("/", 4)[0]
POLL = 0.002  # seconds between looks at the info file while bwrap starts


class PlanError(ValueError):
    """The entry's arguments do not make a plan."""


class Plan:
    """What the entry does before it execs bwrap; carried on its command line, so no file can
    be changed under it and no parser (json costs the entry ~10 ms of imports) is needed."""

    def __init__(
        self,
        info_file: str | os.PathLike[str],
        join_files: Sequence[str] = (),
        rlimits: Mapping[str, tuple[int, int]] | None = None,
        landlock: bool = False,
    ) -> None:
        self.info_file = os.fspath(info_file)  # bwrap writes {"child-pid": N} there
        self.join_files = tuple(join_files)  # cgroup.procs files the entry's pid goes into
        self.rlimits = dict(rlimits or {})  # "RLIMIT_DATA": (soft, hard)
        self.landlock = landlock  # apply Landlock scopes (abstract unix sockets, signals)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plan) and self.args() == other.args()

    def __repr__(self) -> str:
        return f"Plan({' '.join(self.args())})"

    def args(self) -> list[str]:
        """Return the plan as the entry's arguments (before its `--`)."""
        args: list[str] = []
        for join in self.join_files:
            args += ["--join", join]
        for name, (soft, hard) in self.rlimits.items():
            args += ["--rlimit", f"{name}={soft}:{hard}"]
        if self.landlock:
            args.append("--landlock")
        return [*args, "--info", self.info_file]

    @classmethod
    def parse(cls, argv: Sequence[str]) -> tuple[Plan, list[str]]:
        """Return the plan and the bwrap argv in the entry's `argv`; PlanError otherwise."""
        args = list(argv)
        if "--" not in args or args.index("--") == len(args) - 1:
            raise PlanError(f"usage: python -I -m {MODULE} [OPTIONS] --info FILE -- BWRAP ...")
        split = args.index("--")
        options, bwrap = args[:split], args[split + 1 :]
        joins: list[str] = []
        rlimits: dict[str, tuple[int, int]] = {}
        info, scoped = None, False
        while options:
            option = options.pop(0)
            if option == "--landlock":
                scoped = True
                continue
            if option not in ("--join", "--rlimit", "--info") or not options:
                raise PlanError(
                    f"{option!r} is not an entry option (--join, --rlimit, "
                    "--landlock, --info, each but --landlock with a value)"
                )
            value = options.pop(0)
            if option == "--join":
                joins.append(value)
            elif option == "--info":
                info = value
            else:
                rlimits.update([rlimit(value)])
        if info is None:
            raise PlanError("the entry needs --info FILE (where bwrap writes the sandbox's pid)")
        return cls(info, joins, rlimits, scoped), bwrap


def rlimit(value: str) -> tuple[str, tuple[int, int]]:
    """Return the rlimit of a `NAME=SOFT:HARD` argument."""
    name, _, pair = value.partition("=")
    soft, _, hard = pair.partition(":")
    if not name.startswith("RLIMIT_") or not hasattr(resource, name):
        raise PlanError(f"--rlimit {value!r} names no rlimit: give RLIMIT_NAME=SOFT:HARD")
    if not (soft.isdigit() and hard.isdigit()):
        raise PlanError(f"--rlimit {value!r}: SOFT and HARD must be byte or count numbers")
    return name, (int(soft), int(hard))


def prefix(python: str = sys.executable) -> list[str]:
    """Return the argv that runs the entry, before its own arguments."""
    return [python, "-I", "-S", "-c", BOOTSTRAP, IMPORT_ROOT]


def command(plan: Plan, bwrap_argv: Sequence[str], *, python: str = sys.executable) -> list[str]:
    """Return the argv that runs the entry with `plan` in front of `bwrap_argv`."""
    return [*prefix(python), *plan.args(), "--", *bwrap_argv]


def read_info(info_file: str | os.PathLike[str], timeout: float) -> int:
    """Return the sandbox init's host pid once bwrap has written it into `info_file`;
    TimeoutError when it has not within `timeout` seconds."""
    import json  # the gateway's, not the entry's: keep it off the entry's start

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


def prepare(plan: Plan) -> int:
    """Apply the plan to this process; return the info file's fd, inheritable for bwrap."""
    pid = str(os.getpid())
    for join in plan.join_files:
        try:
            with open(join, "w") as procs:  # noqa: PTH123 (pathlib costs the entry ~8 ms)
                procs.write(pid)
        except OSError as error:
            raise OSError(f"cannot join the kernel's cgroup {join}: {error.strerror}") from None
    for name, (soft, hard) in plan.rlimits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if plan.landlock:
        landlock.restrict_scopes()
    fd = os.open(plan.info_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.set_inheritable(fd, True)
    return fd


def main(argv: Sequence[str]) -> int:
    """Run the entry on its arguments; exec bwrap or return non-zero."""
    try:
        plan, bwrap = Plan.parse(argv)
        fd = prepare(plan)
        bwrap = [bwrap[0], "--info-fd", str(fd), *bwrap[1:]]
        try:
            os.execv(bwrap[0], bwrap)
        except OSError as error:
            raise OSError(f"cannot run {bwrap[0]}: {error.strerror}") from None
    except (OSError, ValueError) as error:
        print(f"loomgate sandbox entry: {error}", file=sys.stderr)
        return 2 if isinstance(error, PlanError) else 1
    return 1  # not reached: execv replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
