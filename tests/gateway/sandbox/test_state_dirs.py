"""Every gateway's state dir, noted where no kernel sees it (sandbox/policy/state_dirs.py), and
hidden from every confined kernel a gateway starts afterwards."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.policy.catalog import SandboxCatalog
from loomgate.gateway.sandbox.policy.state_dirs import (
    known_state_dirs,
    note_state_dir,
    state_dirs_file,
)


def test_each_state_dir_is_noted_once_and_gone_ones_are_left_out(tmp_path: Path) -> None:
    listed = tmp_path / "list" / "state-dirs.json"
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    note_state_dir(a, listed)
    note_state_dir(b, listed)
    note_state_dir(a, listed)
    assert known_state_dirs(listed) == [a, b]
    assert listed.stat().st_mode & 0o777 == 0o600
    assert listed.parent.stat().st_mode & 0o777 == 0o700
    b.rmdir()
    assert known_state_dirs(listed) == [a]
    note_state_dir(a, listed)
    assert '"state_dirs": ["' + str(a) + '"]' in listed.read_text()


@pytest.mark.parametrize(
    "text", ["", "{", '{"state_dirs": 3}', '["x"]', '{"state_dirs": [1, "rel"]}']
)
def test_a_list_cut_short_or_malformed_holds_none(tmp_path: Path, text: str) -> None:
    listed = tmp_path / "state-dirs.json"
    listed.write_text(text)
    assert known_state_dirs(listed) == []
    note_state_dir(tmp_path, listed)  # written anew
    assert known_state_dirs(listed) == [tmp_path]


def test_the_list_lies_in_the_default_state_dir_whatever_a_gateway_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.setenv("LOOMGATE_STATE_DIR", str(tmp_path / "elsewhere"))
    assert state_dirs_file() == tmp_path / "home/.local/state/loomgate/state-dirs.json"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dirs_file() == tmp_path / "xdg/loomgate/state-dirs.json"


def test_another_gateways_state_dir_is_hidden_from_this_ones_kernels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    other, mine = tmp_path / "other-state", tmp_path / "my-state"
    other.mkdir()
    mine.mkdir()
    SandboxCatalog(other)  # another gateway, with a --state-dir of its own
    catalog = SandboxCatalog(mine)
    rules = catalog.rules("workspace", tmp_path / "project")
    assert other in rules.hidden and mine in rules.hidden


def test_gateways_noting_their_state_dirs_together_each_keep_theirs(tmp_path: Path) -> None:
    listed = tmp_path / "state-dirs.json"
    dirs = [tmp_path / f"state-{i}" for i in range(24)]
    for path in dirs:
        path.mkdir()
    start = threading.Barrier(len(dirs))

    def note(path: Path) -> None:
        start.wait()
        note_state_dir(path, listed)

    threads = [threading.Thread(target=note, args=(path,)) for path in dirs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(known_state_dirs(listed)) == sorted(dirs)


def test_the_lock_lies_beside_the_list_and_is_the_users_alone(tmp_path: Path) -> None:
    listed = tmp_path / "list" / "state-dirs.json"
    note_state_dir(tmp_path, listed)
    lock = listed.with_name("state-dirs.json.lock")
    assert sorted(p.name for p in listed.parent.iterdir()) == ["state-dirs.json", lock.name]
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
