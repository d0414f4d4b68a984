"""Launch markers in one process: what a marker holds, and what a starting gateway does with
markers whose process is not running (the ones whose process runs:
tests/gateway/residency/test_launches.py)."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest

from loomgate.gateway.process_identity import ProcessIdentity, start_seconds
from loomgate.gateway.residency.launch_markers import (
    LAUNCHING_DIR,
    LaunchMarkers,
    end_launch,
    started_with,
)
from loomgate.gateway.sandbox.confinement.launch import SandboxLaunch
from loomgate.gateway.sandbox.confinement.limits import KernelLimits
from loomgate.gateway.sandbox.network.network_rules import NO_NETWORK
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

LOG = logging.getLogger("test_launch_markers")


def marker(directory: Path, kernel_id: str) -> dict[str, object]:
    """Return the marker of `kernel_id`."""
    return json.loads((directory / f"{kernel_id}.json").read_text())  # type: ignore[no-any-return]


def gone_identity() -> ProcessIdentity:
    """Return an identity no running process has: this process's pid, another start."""
    me = ProcessIdentity.of(os.getpid())
    assert me is not None
    return ProcessIdentity(me.pid, str(int(me.started) + 1), me.boot)


def my_argument() -> str:
    """Return the longest argument of this process's command line (so no other is a prefix)."""
    return max(Path(f"/proc/{os.getpid()}/cmdline").read_bytes().split(b"\0"), key=len).decode()


def sandbox_in(tmp_path: Path) -> SandboxLaunch:
    """Return a sandbox whose directory and (stand-in) cgroup are in `tmp_path`, its init not
    started."""
    rules = SandboxRules("strict", True, (), (Path("/secret"),), NO_NETWORK, 1 << 30, 64)
    group = tmp_path / "cgroup" / "loomgate-k"
    group.mkdir(parents=True)
    limits = KernelLimits("k", "cgroup v2", groups={"memory": group})
    directory = tmp_path / "sandbox"
    (directory / "tmp").mkdir(parents=True)
    return SandboxLaunch(rules, directory, limits, "bubblewrap")


def test_the_markers_live_in_launching() -> None:
    assert LAUNCHING_DIR == "launching"


def test_a_marker_is_written_before_the_launch_and_completed_after(tmp_path: Path) -> None:
    directory = tmp_path / "state" / LAUNCHING_DIR
    markers = LaunchMarkers(directory)
    before = time.time()
    markers.launching("k", "/run/kernel-k.json")
    assert directory.stat().st_mode & 0o777 == 0o700
    assert (directory / "k.json").stat().st_mode & 0o777 == 0o600
    first = marker(directory, "k")
    assert first["connection_file"] == "/run/kernel-k.json"
    assert first["named"] == "/run/kernel-k.json"  # what its command line names
    assert first["identity"] is None
    assert before <= float(first["since"]) <= time.time()  # type: ignore[arg-type]
    identity = ProcessIdentity(123, "456", "boot")
    markers.launched("k", "/run/kernel-k.json", identity, 99, None)
    assert marker(directory, "k") == {
        "connection_file": "/run/kernel-k.json",
        "named": "/run/kernel-k.json",
        "since": first["since"],  # when the launch began, not when it was noted
        "identity": {"pid": 123, "started": "456", "boot": "boot"},
        "pgid": 99,
        "sandbox": None,
    }
    markers.forget("k")
    assert not (directory / "k.json").exists()
    markers.forget("k")  # gone already: nothing to do
    (directory / "k.json").mkdir()
    markers.forget("k")  # it cannot be removed: left for the next start, the launch goes on
    assert (directory / "k.json").is_dir()


def test_a_sandboxed_launch_notes_its_sandbox_and_its_end_removes_it(tmp_path: Path) -> None:
    markers = LaunchMarkers(tmp_path / LAUNCHING_DIR)
    sandbox = sandbox_in(tmp_path)
    markers.launching("k", str(tmp_path / "kernel-k.json"))
    markers.launched("k", str(tmp_path / "kernel-k.json"), gone_identity(), 7, sandbox)
    assert marker(markers.directory, "k")["sandbox"] == json.loads(json.dumps(sandbox.to_json()))
    assert markers.end_unowned(LOG) == 0  # its process is gone: nothing to signal
    assert not sandbox.directory.exists()
    assert not (tmp_path / "cgroup" / "loomgate-k").exists()
    assert list(markers.directory.iterdir()) == []


@pytest.mark.parametrize("earlier", [None, "{not json", '{"connection_file": "c"}', "[1]"])
def test_a_launch_noted_without_a_readable_first_marker_dates_from_now(
    tmp_path: Path, earlier: str | None
) -> None:
    markers = LaunchMarkers(tmp_path)
    if earlier is not None:
        (tmp_path / "k.json").write_text(earlier)
    before = time.time()
    markers.launched("k", "/run/kernel-k.json", None, None, None)
    written = marker(tmp_path, "k")
    assert before <= float(written["since"]) <= time.time()  # type: ignore[arg-type]
    assert (written["identity"], written["pgid"], written["sandbox"]) == (None, None, None)


def test_no_markers_end_nothing(tmp_path: Path) -> None:
    assert LaunchMarkers(tmp_path / "absent").end_unowned(LOG) == 0
    (tmp_path / "empty").mkdir()
    assert LaunchMarkers(tmp_path / "empty").end_unowned(LOG) == 0


def test_markers_whose_process_is_not_running_are_removed_with_its_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    files = {}
    for name in ("a", "b"):
        files[name] = runtime / f"kernel-{name}.json"
        files[name].write_text("{}")
        (runtime / f"kernel-{name}.log").write_text("kernel output")
    markers = LaunchMarkers(tmp_path / LAUNCHING_DIR)
    markers.launching("a", str(files["a"]))  # no pid: no process names this file
    markers.launching("b", str(files["b"]))
    markers.launched("b", str(files["b"]), gone_identity(), None, None)
    (tmp_path / LAUNCHING_DIR / "bad.json").write_text("{torn")
    (tmp_path / LAUNCHING_DIR / "odd.json").write_text('{"since": 1}')
    (tmp_path / LAUNCHING_DIR / "note.txt").write_text("not a marker")
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert markers.end_unowned(LOG) == 0
    warned = sorted(r.getMessage() for r in caplog.records)
    assert len(warned) == 2, warned
    torn = tmp_path / LAUNCHING_DIR / "bad.json"
    with pytest.raises(ValueError) as unreadable:
        json.loads("{torn")
    assert warned == [
        f"Removing an unreadable launch marker {torn}: {unreadable.value}",
        f"Removing an unreadable launch marker {torn.with_name('odd.json')}: 'connection_file'",
    ]
    assert sorted(p.name for p in (tmp_path / LAUNCHING_DIR).iterdir()) == ["note.txt"]
    assert sorted(p.name for p in runtime.iterdir()) == []  # connection files and logs gone


def test_a_marker_whose_process_ended_is_not_signalled(tmp_path: Path) -> None:
    connection = tmp_path / "kernel-k.json"
    data = {"connection_file": str(connection), "since": 0.0, "identity": None}
    assert end_launch(data, str(connection)) is False
    data["identity"] = gone_identity().to_json()
    assert end_launch(data, str(connection)) is False  # this process's pid, never signalled


def test_a_marker_with_an_identity_is_judged_by_it_not_by_its_connection_file() -> None:
    """This process names the connection file and began after `since`, but the marker's
    identity is another start of its pid: it is not signalled."""
    started = start_seconds(os.getpid())
    assert started is not None
    identity = gone_identity().to_json()
    data = {"connection_file": my_argument(), "since": started, "identity": identity}
    assert end_launch(data, my_argument()) is False


def test_processes_naming_the_connection_file_that_began_before_the_marker_are_spared() -> None:
    """This process names it, and so may others (the same interpreter): a marker an hour
    ahead is later than all of them, so none is signalled."""
    data = {"connection_file": my_argument(), "since": time.time() + 3600, "identity": None}
    assert end_launch(data, my_argument()) is False


def test_the_processes_naming_a_connection_file_started_after_the_marker(tmp_path: Path) -> None:
    argument = my_argument()
    started = start_seconds(os.getpid())
    assert started is not None
    assert os.getpid() in started_with(argument, started)
    assert os.getpid() in started_with(argument, started + 0.9)  # a second's slack
    assert os.getpid() in started_with(argument, started + 1.0)  # the whole second
    assert os.getpid() not in started_with(argument, started + 1.5)  # and no more
    assert os.getpid() in started_with(argument, 0.0)
    assert os.getpid() not in started_with(argument, started + 5)  # it began before
    assert started_with(str(tmp_path / "kernel-none.json"), 0.0) == []
    assert len(argument) > 1
    assert os.getpid() not in started_with(argument[:-1], 0.0)  # a whole argument, not a part


def test_a_launch_keeps_the_connection_file_its_command_line_names(tmp_path: Path) -> None:
    markers = LaunchMarkers(tmp_path / LAUNCHING_DIR)
    markers.launching("k", "/run/kernel-k.json", "/kernels/k/connection.json")
    markers.launched("k", "/run/kernel-k.json", ProcessIdentity(123, "456", "boot"), None, None)
    assert marker(markers.directory, "k")["named"] == "/kernels/k/connection.json"
