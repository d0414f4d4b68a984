"""The entry stage before bwrap run for real: its one-line errors, and a run that joins the
kernel's cgroups, sets rlimits and Landlock scopes, and hands bwrap its info fd (its plan and
what needs no exec: test_entry_plan.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import entry
from loomgate.gateway.sandbox.limits import KernelLimits
from tests.gateway.sandbox import sandboxes

MiB = 2**20


def run_entry(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the entry with `args`, as the gateway does."""
    return subprocess.run(
        [*entry.prefix(sys.executable), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        (["--", "/bin/true"], 2, "needs --info FILE"),
        (
            ["--join", "/nonexistent/cgroup.procs", "--info", "INFO", "--", "/bin/true"],
            1,
            "cannot join the kernel's cgroup /nonexistent/cgroup.procs: No such file",
        ),
        (["--info", "/nonexistent/info.json", "--", "/bin/true"], 1, "No such file or directory"),
        (
            ["--info", "INFO", "--", "/nonexistent/bwrap"],
            1,
            "cannot run /nonexistent/bwrap: No such file or directory",
        ),
    ],
)
def test_errors_before_exec_are_one_line(
    tmp_path: Path, args: list[str], status: int, says: str
) -> None:
    done = run_entry(*(str(tmp_path / "info.json") if a == "INFO" else a for a in args))
    assert done.returncode == status
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("loomgate sandbox entry: ")
    assert says in done.stderr, done.stderr


def test_the_entry_execs_what_follows(tmp_path: Path) -> None:
    info, show = tmp_path / "info.json", tmp_path / "show"
    show.write_text('#!/bin/sh\necho "$@"\necho child-pid >&3\n')
    show.chmod(0o755)
    done = run_entry("--info", str(info), "--", str(show), "x")
    assert (done.returncode, done.stdout) == (0, "--info-fd 3 x\n"), done.stderr
    assert info.read_text() == "child-pid\n"  # fd 3 is the info file, open for writing


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


def test_the_entry_imports_only_what_it_uses(tmp_path: Path) -> None:
    # Every kernel start waits for the entry's interpreter: no `site` (its .pth files and
    # site-packages), no runpy (`-m`), none of the modules its comments keep it from.
    python, *options = entry.prefix(sys.executable)
    done = subprocess.run(
        [python, "-X", "importtime", *options, "--info", str(tmp_path / "i"), "--", "/bin/true"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()}
    assert "loomgate.gateway.sandbox.landlock" in imported  # what it needs came
    assert imported.isdisjoint({"site", "runpy", "json", "pathlib", "collections.abc"}), imported
