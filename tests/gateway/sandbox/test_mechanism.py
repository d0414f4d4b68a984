"""What this machine can enforce: the real probe here, and its sentence for a bwrap that cannot
make a sandbox (described machines and cgroup text: test_mechanism_decisions.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import mechanism
from tests.gateway.sandbox import sandboxes


def test_this_machine_enforces_everything() -> None:
    here = mechanism.probe()
    assert here is mechanism.probe()  # found once per process
    assert here.bwrap is not None and os.access(here.bwrap, os.X_OK)
    assert here.landlock_scopes
    assert here.limits.cgroup_version == 1 and set(here.limits.cgroups) == {"memory", "pids"}
    rules = sandboxes.rules(memory=2**30, processes=100)
    here.check(rules)
    assert here.describe(rules) == "bubblewrap, landlock scopes, cgroup v1"


def test_the_running_probe_sentences(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    found, problem = mechanism.working_bwrap()
    assert found is None and problem is not None
    assert "(bwrap: setting up uid map: Permission denied)" in problem
    assert "user namespaces" in problem and problem.endswith("or choose the sandbox profile none")
    assert subprocess.run([str(broken)], capture_output=True, check=False).returncode == 1
