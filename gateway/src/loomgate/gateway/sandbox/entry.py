"""The stage before bwrap, outside the sandbox: `python -I -m loomgate.gateway.sandbox.entry
PLAN_JSON -- BWRAP_ARGV...` joins the kernel's cgroups, sets its rlimits, applies Landlock
scopes, opens bwrap's info file and execs bwrap (stdlib and landlock only: it is on the start
path)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loomgate.gateway.sandbox import landlock

__all__ = ["Plan", "command", "main", "read_info"]

MODULE = "loomgate.gateway.sandbox.entry"
POLL = 0.002  # seconds between looks at the info file while bwrap starts


@dataclass(frozen=True)
class Plan:
    """What the entry does before it execs bwrap."""

    info_file: Path  # bwrap writes {"child-pid": N} here through --info-fd
    join_files: tuple[str, ...] = ()  # cgroup.procs files to write the entry's pid into
    rlimits: dict[str, tuple[int, int]] = field(default_factory=dict)  # "RLIMIT_DATA": (s, h)
    landlock: bool = False  # apply Landlock scopes (abstract unix sockets, signals)

    def to_json(self) -> str:
        """Return the plan as the entry reads it."""
        return json.dumps(
            {
                "info_file": str(self.info_file),
                "join_files": list(self.join_files),
                "rlimits": {name: list(pair) for name, pair in self.rlimits.items()},
                "landlock": self.landlock,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """Return the plan in `text`; ValueError naming what is wrong otherwise."""
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("info_file"), str):
            raise ValueError("the plan must be a JSON object with an `info_file` string")
        rlimits = data.get("rlimits", {})
        if not isinstance(rlimits, dict):
            raise ValueError("the plan's `rlimits` must map RLIMIT_* names to [soft, hard]")
        for name in rlimits:
            if not name.startswith("RLIMIT_") or not hasattr(resource, name):
                raise ValueError(f"the plan names an unknown rlimit {name!r}")
        return cls(
            info_file=Path(data["info_file"]),
            join_files=tuple(str(path) for path in data.get("join_files", ())),
            rlimits={name: (int(pair[0]), int(pair[1])) for name, pair in rlimits.items()},
            landlock=bool(data.get("landlock", False)),
        )

    def write(self, path: Path) -> Path:
        """Write the plan to `path` (mode 0600) and return `path`."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(self.to_json())
        return path


def command(
    plan_file: Path, bwrap_argv: Sequence[str], *, python: str = sys.executable
) -> list[str]:
    """Return the argv that runs the entry with `plan_file` in front of `bwrap_argv`."""
    return [python, "-I", "-m", MODULE, str(plan_file), "--", *bwrap_argv]


def read_info(info_file: Path, timeout: float) -> int:
    """Return the sandbox init's host pid once bwrap has written it into `info_file`;
    TimeoutError when it has not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid = json.loads(info_file.read_text())["child-pid"]
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
            with Path(join).open("w") as procs:
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
    """Run the entry: `PLAN_JSON -- BWRAP_ARGV...`; exec bwrap or return non-zero."""
    args = list(argv)
    if len(args) < 3 or args[1] != "--":
        print(
            f"loomgate sandbox entry: usage: python -I -m {MODULE} PLAN -- BWRAP ...",
            file=sys.stderr,
        )
        return 2
    try:
        try:
            text = Path(args[0]).read_text()
        except OSError as error:
            raise OSError(f"cannot read the plan {args[0]}: {error.strerror}") from None
        fd = prepare(Plan.from_json(text))
        bwrap = [args[2], "--info-fd", str(fd), *args[3:]]
        try:
            os.execv(bwrap[0], bwrap)
        except OSError as error:
            raise OSError(f"cannot run {bwrap[0]}: {error.strerror}") from None
    except (OSError, ValueError) as error:
        print(f"loomgate sandbox entry: {error}", file=sys.stderr)
        return 1
    return 1  # not reached: execv replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
