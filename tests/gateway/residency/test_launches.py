"""Launch markers: a kernel process between its launch and its resident.json is ended by the
next gateway, found by its identity or, when its pid was never noted, by its connection file
and start time; nothing else is touched."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loomgate.gateway.process_identity import ProcessIdentity, start_seconds
from loomgate.gateway.residency.launch_markers import LaunchMarkers, end_launch
from loomgate.gateway.sandbox.confinement.launch import SandboxLaunch
from loomgate.gateway.sandbox.confinement.limits import KernelLimits
from loomgate.gateway.sandbox.network.network_rules import NO_NETWORK
from loomgate.gateway.sandbox.policy.profiles import SandboxRules
from tests.gateway.sandbox import sandboxes

LOG = logging.getLogger(__name__)
SLEEPER = "import sys, time; time.sleep(600)"


def sleeper(connection_file: Path) -> subprocess.Popen[bytes]:
    """Start a process whose command line names `connection_file`, as a kernel's does; return
    once its command line shows (Popen returns once the exec has begun, and for a moment after
    a vfork /proc still shows none: no event says when it does)."""
    process = subprocess.Popen([sys.executable, "-c", SLEEPER, "-f", str(connection_file)])
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    deadline = time.monotonic() + 10
    while str(connection_file).encode() not in cmdline.read_bytes().split(b"\0"):
        assert time.monotonic() < deadline, "the sleeper's command line never showed"
        time.sleep(0.001)
    return process


def stop(*processes: subprocess.Popen[bytes]) -> None:
    """End this test's own processes, whatever the test did to them."""
    for process in processes:
        process.kill()
        process.wait()


def test_a_marker_without_a_pid_ends_the_process_naming_its_connection_file(
    tmp_path: Path,
) -> None:
    markers = LaunchMarkers(tmp_path / "launching")
    connection, other = tmp_path / "kernel-a.json", tmp_path / "kernel-b.json"
    connection.write_text("{}")
    markers.launching("a", str(connection))  # killed before the pid was noted
    launched, unrelated = sleeper(connection), sleeper(other)
    try:
        assert markers.end_unowned(LOG) == 1
        assert launched.wait(10) == -9
        assert unrelated.poll() is None  # another connection file: not this kernel's
        assert not connection.exists() and list(markers.directory.iterdir()) == []
    finally:
        stop(launched, unrelated)


def test_a_process_started_before_the_marker_is_not_taken_for_its_kernel(
    tmp_path: Path,
) -> None:
    markers = LaunchMarkers(tmp_path / "launching")
    connection = tmp_path / "kernel-a.json"
    older = sleeper(connection)
    try:
        started = start_seconds(older.pid)
        assert started is not None and abs(started - time.time()) < 5
        markers.launching("a", str(connection))
        marker = markers.directory / "a.json"
        data = json.loads(marker.read_text())
        marker.write_text(json.dumps({**data, "since": started + 5}))  # launched later
        assert markers.end_unowned(LOG) == 0
        assert older.poll() is None
    finally:
        stop(older)


def test_a_marker_with_an_identity_ends_that_process_only_while_it_is_that_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    markers = LaunchMarkers(tmp_path / "launching")
    paths = [tmp_path / f"kernel-{name}.json" for name in "abc"]
    alive, gone, other = (sleeper(path) for path in paths)
    try:
        for kernel_id, process, path in zip("abc", (alive, gone, other), paths, strict=True):
            markers.launching(kernel_id, str(path))
            markers.launched(kernel_id, str(path), ProcessIdentity.of(process.pid), None, None)
        gone.kill()
        gone.wait()
        with caplog.at_level(logging.WARNING, logger=LOG.name):
            assert markers.end_unowned(LOG) == 2
        assert [r.getMessage() for r in caplog.records] == [
            "Ended 2 kernel(s) a killed gateway was starting"
        ]
        assert alive.wait(10) == -9
        assert other.wait(10) == -9
        assert list(markers.directory.iterdir()) == []
    finally:
        stop(alive, other)


def test_a_marker_with_a_process_group_ends_the_whole_group(tmp_path: Path) -> None:
    markers = LaunchMarkers(tmp_path / "launching")
    connection = tmp_path / "kernel-a.json"
    leader = subprocess.Popen([sys.executable, "-c", SLEEPER], preexec_fn=os.setpgrp)
    member = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, "-f", str(connection)],
        preexec_fn=lambda: os.setpgid(0, leader.pid),  # Python 3.10 has no process_group
    )
    try:
        markers.launching("a", str(connection))
        markers.launched("a", str(connection), ProcessIdentity.of(member.pid), leader.pid, None)
        assert markers.end_unowned(LOG) == 1
        assert member.wait(10) == -9
        assert leader.wait(10) == -9  # not named by the marker but by its group
    finally:
        stop(leader, member)


def test_a_sandboxed_marker_ends_the_sandbox_init_and_removes_the_sandbox(
    tmp_path: Path,
) -> None:
    markers = LaunchMarkers(tmp_path / "launching")
    connection = tmp_path / "kernel-a.json"
    init, kernel = sleeper(tmp_path / "init"), sleeper(connection)
    directory = tmp_path / "sandbox"
    directory.mkdir()
    rules = SandboxRules("strict", True, (), (), NO_NETWORK, None, None)
    sandbox = SandboxLaunch(
        rules, directory, KernelLimits("a", "none"), "bubblewrap", ProcessIdentity.of(init.pid)
    )
    try:
        markers.launching("a", str(connection))
        markers.launched("a", str(connection), ProcessIdentity.of(kernel.pid), None, sandbox)
        assert markers.end_unowned(LOG) == 1
        assert init.wait(10) == -9  # its init ends everything in the sandbox
        assert kernel.wait(10) == -9
        assert not directory.exists()
    finally:
        stop(init, kernel)


def test_a_forgotten_marker_leaves_its_process_alone(tmp_path: Path) -> None:
    markers = LaunchMarkers(tmp_path / "launching")
    connection = tmp_path / "kernel-a.json"
    process = sleeper(connection)
    try:
        markers.launching("a", str(connection))
        markers.launched("a", str(connection), ProcessIdentity.of(process.pid), None, None)
        markers.forget("a")  # its resident.json took over
        assert markers.end_unowned(LOG) == 0
        assert process.poll() is None
    finally:
        stop(process)


def test_a_sandbox_killed_before_its_init_was_noted_is_ended_whole(tmp_path: Path) -> None:
    # The gateway noted bubblewrap's pid, then died before bwrap named the sandbox's init: the
    # init has a session of its own, so ending bwrap alone left it and the kernel running.
    root = Path("/var/tmp") / f"loomgate-launch-{os.getpid()}"
    project, kernel_dir = root / "project", root / "k"
    project.mkdir(parents=True)
    connection = root / "kernel-a.json"
    connection.write_text("{}")
    markers = LaunchMarkers(tmp_path / "launching")
    rules = sandboxes.rules(writable=[project], network=False)
    try:
        markers.launching("a", str(connection))
        with sandboxes.started(
            rules, SLEEPER, cwd=project, kernel_dir=kernel_dir, args=("-f", str(connection))
        ) as box:
            sandbox = SandboxLaunch(rules, kernel_dir, KernelLimits("a", "none"), "bubblewrap")
            bwrap = ProcessIdentity.of(box.process.pid)
            markers.launched("a", str(connection), bwrap, None, sandbox)
            assert markers.end_unowned(LOG) == 1
            assert box.process.wait(10) == -9
            assert sandboxes.wait_gone(box.init_pid, box.init_start, 10), "the init was left"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_launch_is_found_by_the_connection_file_its_command_line_names(tmp_path: Path) -> None:
    """A relayed kernel's command line names its own connection file, not the gateway's: the
    marker's `named` finds it."""
    named = tmp_path / "connection.json"
    began = time.time()
    child = sleeper(named)
    try:
        gateway_side = str(tmp_path / "kernel-k.json")
        data = {"connection_file": gateway_side, "since": began, "identity": None}
        assert end_launch(dict(data), gateway_side) is False  # nothing names the gateway's file
        assert end_launch({**data, "named": str(named)}, gateway_side) is True
        assert child.wait(10) == -9
    finally:
        stop(child)


def test_a_marker_of_an_earlier_gateway_names_its_process_by_its_connection_file(
    tmp_path: Path,
) -> None:
    # Written before markers said what the command line names: its connection file is that.
    markers = LaunchMarkers(tmp_path / "launching")
    connection = tmp_path / "kernel-a.json"
    markers.launching("a", str(connection))
    marker = markers.directory / "a.json"
    data = json.loads(marker.read_text())
    del data["named"]
    marker.write_text(json.dumps(data))
    launched = sleeper(connection)
    try:
        assert markers.end_unowned(LOG) == 1
        assert launched.wait(10) == -9
    finally:
        stop(launched)
