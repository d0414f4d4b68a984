"""The entry before bwrap run for real: its shell's one-line errors, arguments kept as they are,
the exec in the shell's own process, and a run that joins the kernel's cgroups, sets rlimits and
Landlock scopes and hands bwrap its info fd (its plan and what needs no exec:
test_entry_plan.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import entry
from loomgate.gateway.sandbox.limits import KernelLimits
from tests.gateway.sandbox import sandboxes

MiB = 2**20
ECHO_ARGV = "import json, os, sys; print(json.dumps([os.getpid(), sys.argv[1:]]))"


def run_entry(plan: entry.Plan, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the entry with `plan` in front of `argv`, as the gateway does."""
    return entry.spawn(
        plan,
        lambda: subprocess.run(
            entry.command(plan, argv), capture_output=True, text=True, timeout=60, check=False
        ),
    )


@pytest.mark.parametrize(
    ("plan", "argv", "status", "says"),
    [
        (
            entry.Plan(["/nonexistent/cgroup.procs"]),
            ["/bin/true"],
            1,
            "loomgate sandbox entry: cannot join the kernel's cgroup /nonexistent/cgroup.procs",
        ),
        (entry.Plan(), ["/nonexistent/bwrap", "--x"], 127, "/nonexistent/bwrap: not found"),
        # Soft above hard: the shell's ulimit refuses, and nothing runs.
        (
            entry.Plan(rlimits={"RLIMIT_DATA": (2 * MiB, MiB)}),
            ["/bin/echo", "ran"],
            1,
            "ulimit: error setting limit (Invalid argument)",
        ),
    ],
)
def test_errors_before_exec_are_one_line_and_nothing_runs(
    plan: entry.Plan, argv: list[str], status: int, says: str
) -> None:
    done = run_entry(plan, argv)
    assert (done.returncode, done.stdout) == (status, "")
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(entry.NAME), done.stderr
    assert says in done.stderr, done.stderr


def test_what_follows_runs_in_the_shells_own_process_with_its_arguments_as_they_are(
    tmp_path: Path,
) -> None:
    joined = tmp_path / "cgroup.procs"
    joined.write_text("")
    args = ["a b", "$HOME", "*", "--", "", "x\ny", "'\"", "-d"]
    done = run_entry(entry.Plan([str(joined)]), [sys.executable, "-I", "-c", ECHO_ARGV, *args])
    assert done.returncode == 0, done.stderr
    pid, seen = json.loads(done.stdout)
    assert seen == args
    assert joined.read_text() == f"{pid}\n"  # the pid that joined is the one that ran: an exec


def test_the_entrys_children_cannot_signal_outside_and_the_gateway_still_can() -> None:
    probe = f"import os; os.kill({os.getpid()}, 0)"
    refused = run_entry(entry.Plan(landlock=True), [sys.executable, "-I", "-c", probe])
    assert refused.returncode == 1 and "PermissionError" in refused.stderr, refused.stderr
    allowed = run_entry(entry.Plan(), [sys.executable, "-I", "-c", probe])
    assert allowed.returncode == 0, allowed.stderr
    os.kill(os.getpid(), 0)  # this thread was not scoped


def test_the_entry_applies_its_plan_before_bwrap(tmp_path: Path) -> None:
    limits = KernelLimits.create(f"entry-{uuid.uuid4().hex[:8]}", sandboxes.rules(memory=512 * MiB))
    try:
        payload = (
            "import json, os, resource\n"
            "lines = open('/proc/self/status').read().splitlines()\n"
            "status = dict(line.split(':\\t', 1) for line in lines)\n"
            "groups = open('/proc/self/cgroup').read().splitlines()\n"
            "print(json.dumps({\n"
            "    'no_new_privs': status['NoNewPrivs'].strip(),\n"
            "    'data': resource.getrlimit(resource.RLIMIT_DATA),\n"
            "    'cgroup': [line for line in groups if ':memory:' in line],\n"
            "    'fds': sorted(os.listdir('/proc/self/fd')),\n"
            "}))"
        )
        limits.rlimits["RLIMIT_DATA"] = (768 * MiB, 768 * MiB)  # both mechanisms at once, here
        rules = sandboxes.rules(writable=[tmp_path])
        done = sandboxes.run(rules, payload, cwd=tmp_path, kernel_dir=tmp_path / "k", limits=limits)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["no_new_privs"] == "1"  # Landlock was applied (it needs no_new_privs)
        assert result["data"] == [768 * MiB, 768 * MiB]
        assert result["cgroup"][0].endswith(f"/loomgate-{limits.kernel_id}")
        assert result["fds"] == ["0", "1", "2", "3"]  # bwrap's info fd did not follow inside
        assert limits.groups["memory"].exists()
    finally:
        assert limits.remove()
