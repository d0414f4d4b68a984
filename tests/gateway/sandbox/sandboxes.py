"""Running a plain `python -c PAYLOAD` through the entry and bwrap, as the gateway runs a kernel;
the sandbox is always ended by its init's pid, also when a test fails."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from loomgate.gateway.sandbox.confinement import bubblewrap, entry
from loomgate.gateway.sandbox.confinement.limits import KernelLimits
from loomgate.gateway.sandbox.confinement.mechanism import probe
from loomgate.gateway.sandbox.network.network_rules import parse_network
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

START_TIMEOUT = 30.0
RUN_TIMEOUT = 60.0


def rules(
    *,
    writable: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    network: bool | str | list[str] = "host",  # what bwrap alone gives: no proxy runs here
    memory: int | None = None,
    processes: int | None = None,
) -> SandboxRules:
    """Return confined rules with these paths and limits."""
    return SandboxRules(
        profile="test",
        confined=True,
        writable=tuple(writable),
        hidden=tuple(hidden),
        network=parse_network(network),
        memory=memory,
        processes=processes,
    )


@dataclass
class Sandbox:
    """A sandbox the test started: bwrap's process (started through the entry) and its init."""

    process: subprocess.Popen[str]
    init_pid: int
    info_file: Path
    init_start: str  # the init's start time (/proc/PID/stat): the proof it is still the same


def start_time(pid: int) -> str | None:
    """Return when process `pid` started (clock ticks since boot), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def argv(
    rule_set: SandboxRules,
    payload: str,
    *,
    cwd: Path,
    kernel_dir: Path,
    connection_file: Path | None = None,
    limits: KernelLimits | None = None,
    landlock: bool = True,
    args: Sequence[str] = (),
    info_fd: int | None = None,
    python: str = sys.executable,
) -> list[str]:
    """Return the gateway's argv for `payload`: entry, then bwrap, then `python` (in a
    prepared kernel dir)."""
    bwrap = getattr(probe().confiner, "bwrap", None)
    assert bwrap is not None, probe().problem or f"not bubblewrap here: {probe().describe()}"
    inner = bubblewrap.command(
        rule_set,
        [python, "-I", "-c", payload, *args],
        bwrap=bwrap,
        cwd=cwd,
        kernel_dir=kernel_dir,
        connection_file=connection_file,
        unset_env=("JPY_PARENT_PID", "LOOMGATE_TOKEN"),
        info_fd=info_fd,
    )
    return [*(limits.prefix if limits else []), *entry.command(plan_of(limits, landlock), inner)]


def plan_of(limits: KernelLimits | None, landlock: bool) -> entry.Plan:
    """Return the entry's plan for `limits` (none: no cgroup, no rlimit)."""
    return entry.Plan(
        join_files=tuple(limits.join_files) if limits else (),
        rlimits=dict(limits.rlimits) if limits else {},
        landlock=landlock,
    )


@contextmanager
def started(
    rule_set: SandboxRules,
    payload: str,
    *,
    cwd: Path,
    kernel_dir: Path,
    env: dict[str, str] | None = None,
    **options: object,
) -> Iterator[Sandbox]:
    """Start `payload` in a sandbox (stdout and stderr piped); end it on leaving."""
    options.setdefault("landlock", True)
    bubblewrap.prepare_kernel_dir(kernel_dir)
    info_fd = entry.open_info(bubblewrap.info_file(kernel_dir))
    try:
        command = argv(
            rule_set,
            payload,
            cwd=cwd,
            kernel_dir=kernel_dir,
            info_fd=info_fd,
            **options,  # type: ignore[arg-type]
        )
        plan = plan_of(options.get("limits"), bool(options["landlock"]))  # type: ignore[arg-type]
        process = entry.spawn(
            plan,
            lambda: subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                pass_fds=(info_fd,),
            ),
        )
    finally:
        os.close(info_fd)
    init_pid, init_start = 0, None
    try:
        init_pid = entry.read_info(bubblewrap.info_file(kernel_dir), START_TIMEOUT)
        init_start = start_time(init_pid)
        assert init_start is not None, "the sandbox init ended before the test saw it"
        yield Sandbox(process, init_pid, bubblewrap.info_file(kernel_dir), init_start)
    finally:
        # The init outlives bwrap when bwrap alone is killed: end it when it is still the same.
        if init_pid and init_start is not None and start_time(init_pid) == init_start:
            bubblewrap.kill(init_pid)
        if process.poll() is None:
            process.kill()
        if process.stdout is not None and not process.stdout.closed:
            process.communicate(timeout=RUN_TIMEOUT)
        process.wait(timeout=RUN_TIMEOUT)


def run(
    rule_set: SandboxRules,
    payload: str,
    *,
    cwd: Path,
    kernel_dir: Path,
    env: dict[str, str] | None = None,
    **options: object,
) -> subprocess.CompletedProcess[str]:
    """Run `payload` in a sandbox to its end; return its exit status and output."""
    with started(rule_set, payload, cwd=cwd, kernel_dir=kernel_dir, env=env, **options) as box:
        out, err = box.process.communicate(timeout=RUN_TIMEOUT)
        return subprocess.CompletedProcess(box.process.args, box.process.returncode, out, err)


def wait_gone(pid: int, started: str, timeout: float) -> bool:
    """Return whether process `pid` (started at `started`) has ended within `timeout` seconds
    (no event tells of a stranger's end: its /proc entry is polled)."""
    deadline = time.monotonic() + timeout
    while start_time(pid) == started:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
