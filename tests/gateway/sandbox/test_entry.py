"""The entry stage before bwrap: its plan, its one-line errors, and a real run that joins the
kernel's cgroups, sets rlimits and Landlock scopes, and hands bwrap its info fd."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import bubblewrap, entry
from loomgate.gateway.sandbox.limits import KernelLimits
from tests.gateway.sandbox import sandboxes

MiB = 2**20


def test_the_plan_round_trips(tmp_path: Path) -> None:
    plan = entry.Plan(
        info_file=tmp_path / "info.json",
        join_files=("/sys/fs/cgroup/memory/x/cgroup.procs",),
        rlimits={"RLIMIT_DATA": (MiB, 2 * MiB)},
        landlock=True,
    )
    written = plan.write(tmp_path / "plan.json")
    assert entry.Plan.from_json(written.read_text()) == plan
    assert written.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[]", "JSON object with an `info_file`"),
        ('{"join_files": []}', "JSON object with an `info_file`"),
        ('{"info_file": "/i", "rlimits": [1]}', "map RLIMIT_"),
        ('{"info_file": "/i", "rlimits": {"RLIMIT_NOPE": [1, 1]}}', "unknown rlimit 'RLIMIT_NOPE'"),
        ('{"info_file": "/i", "rlimits": {"getrlimit": [1, 1]}}', "unknown rlimit"),
    ],
)
def test_a_bad_plan_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        entry.Plan.from_json(text)


def test_the_command_runs_the_module_isolated(tmp_path: Path) -> None:
    argv = entry.command(tmp_path / "p.json", ["/usr/bin/bwrap", "--", "x"], python="/py")
    assert argv == [
        "/py",
        "-I",
        "-m",
        entry.MODULE,
        str(tmp_path / "p.json"),
        "--",
        "/usr/bin/bwrap",
        "--",
        "x",
    ]


def run_entry(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the entry module with `args`, as the gateway does."""
    return subprocess.run(
        [sys.executable, "-I", "-m", entry.MODULE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("case", "status", "says"),
    [
        ("usage", 2, "usage: python -I -m loomgate.gateway.sandbox.entry PLAN -- BWRAP"),
        ("no plan", 1, "cannot read the plan .*none.json: No such file or directory"),
        ("bad plan", 1, "JSON object with an `info_file`"),
        ("no cgroup", 1, "cannot join the kernel's cgroup /nonexistent/cgroup.procs"),
        ("no bwrap", 1, "cannot run /nonexistent/bwrap: No such file or directory"),
    ],
)
def test_errors_before_exec_are_one_line(tmp_path: Path, case: str, status: int, says: str) -> None:
    plan = tmp_path / "plan.json"
    info = tmp_path / "info.json"
    if case == "bad plan":
        plan.write_text("[]")
    elif case == "no cgroup":
        entry.Plan(info, join_files=("/nonexistent/cgroup.procs",)).write(plan)
    else:
        entry.Plan(info).write(plan)
    args = {"usage": [str(plan)], "no plan": [str(tmp_path / "none.json"), "--", "/bin/true"]}
    done = run_entry(
        *args.get(
            case, [str(plan), "--", "/nonexistent/bwrap" if case == "no bwrap" else "/bin/true"]
        )
    )
    assert done.returncode == status
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("loomgate sandbox entry: ")
    assert re.search(says, done.stderr), done.stderr


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


@pytest.mark.parametrize("text", ["", "{", '{"child-pid": 0}', '{"other": 5}'])
def test_read_info_waits_for_a_pid(tmp_path: Path, text: str) -> None:
    info = tmp_path / "info.json"
    info.write_text(text)
    with pytest.raises(TimeoutError, match="wrote no sandbox pid"):
        entry.read_info(info, 0.05)


def test_read_info_returns_the_init_pid(tmp_path: Path) -> None:
    info = bubblewrap.info_file(tmp_path)
    info.write_text('{\n    "child-pid": 4242\n}\n')
    assert entry.read_info(info, 0) == 4242
