"""A confined kernel's launch: its rules kept for a later gateway and shown on the wire, and
the macOS command (sandbox-exec; its text is all that can be checked on Linux)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loomgate.gateway.sandbox import launch, mechanism
from loomgate.gateway.sandbox.launch import (
    SandboxLaunch,
    rules_from_json,
    rules_from_wire,
    rules_to_json,
    sandbox_wire,
)
from loomgate.gateway.sandbox.limits import KernelLimits
from loomgate.gateway.sandbox.mechanism import LimitsHost, Mechanism, SandboxUnavailable
from loomgate.gateway.sandbox.profiles import SandboxRules

RULES = SandboxRules(
    profile="strict",
    confined=True,
    writable=(Path("/work/project"),),
    hidden=(Path("/home/p/.ssh"), Path("/home/p/.local/state/loomgate")),
    network=False,
    memory=None,
    processes=None,
)
DARWIN = Mechanism("Darwin", None, None, 0, LimitsHost())


def test_rules_survive_the_resident_file_and_the_wire() -> None:
    assert rules_from_json(rules_to_json(RULES)) == RULES
    shown = sandbox_wire(RULES, "bubblewrap, landlock scopes")
    assert shown["hidden"] == ["/home/p/.ssh", "/home/p/.local/state/loomgate"]
    assert rules_from_wire(shown) == RULES
    assert not rules_from_wire(sandbox_wire(RULES, "")).confined  # nothing enforces it


def test_a_launch_is_kept_whole_for_a_later_gateway(tmp_path: Path) -> None:
    limits = KernelLimits("k1", "cgroup v1", {"memory": tmp_path / "m"}, oom_kills=2)
    kept = SandboxLaunch(RULES, tmp_path, limits, "bubblewrap, cgroup v1")
    back = SandboxLaunch.from_json(kept.to_json())
    assert (back.rules, back.directory, back.mechanism) == (RULES, tmp_path, kept.mechanism)
    assert back.limits == limits
    assert back.has_init and back.init is None


def test_on_macos_the_kernel_runs_under_sandbox_exec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "probe", lambda: DARWIN)
    sandbox = SandboxLaunch(RULES, tmp_path, KernelLimits("k1", "none"), "sandbox-exec")
    connection = tmp_path / "kernel-k1.json"
    argv = sandbox.command(
        ["python", "-m", "ipykernel_launcher", "-f", str(connection)],
        cwd=Path("/work/project"),
        connection_file=connection,
        unset_env=(),
    )
    assert argv[:2] == ["/usr/bin/sandbox-exec", "-p"]
    text = argv[2]
    assert "(deny network*)" in text
    assert '"/home/p/.ssh"' in text and str(connection) in text
    assert argv[3:] == [
        "/usr/bin/env",
        f"TMPDIR={tmp_path / 'tmp'}",
        "python",
        "-m",
        "ipykernel_launcher",
        "-f",
        str(connection),
    ]
    assert not sandbox.has_init  # signals go to the kernel process itself


def test_macos_refuses_limits_it_cannot_enforce(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxUnavailable, match="sandbox-exec is missing"):
        DARWIN.check(RULES)
    monkeypatch.setattr(mechanism, "SANDBOX_EXEC", "/bin/sh")  # one that exists here
    DARWIN.check(RULES)
    limited = SandboxRules(**{**vars(RULES), "memory": 1 << 30})
    with pytest.raises(SandboxUnavailable, match="cannot enforce on macOS: set memory = false"):
        DARWIN.check(limited)
    assert DARWIN.describe(RULES) == "sandbox-exec"
