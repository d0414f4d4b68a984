"""Where loomgate runs from and the interpreter a kernel runs on: the paths every sandbox keeps
read-only (and visible under the host's /tmp)."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.policy import installation
from loomgate.gateway.sandbox.policy.installation import (
    editable_url_root,
    installation_roots,
    interpreter_roots,
    venv_home,
)
from loomgate.gateway.sandbox.policy.profiles import lies_inside

REPOSITORY = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("text", "root"),
    [
        ('{"url": "file:///work/main", "dir_info": {"editable": true}}', "/work/main"),
        ('{"url": "file://localhost/a%20b", "dir_info": {"editable": true}}', "/a b"),
        ('{"url": "file:///work/main", "dir_info": {}}', None),  # a copy: its files are its own
        ('{"url": "file:///work/main", "dir_info": {"editable": false}}', None),
        ('{"url": "https://example.org/x.whl", "archive_info": {}}', None),
        ('{"url": "file://host/share", "dir_info": {"editable": true}}', None),
        ('{"url": 3, "dir_info": {"editable": true}}', None),
        ("[]", None),
        ("not json", None),
        (None, None),
    ],
)
def test_an_editable_install_names_its_source_tree(text: str | None, root: str | None) -> None:
    assert editable_url_root(text) == (Path(root) if root else None)


def test_what_this_gateway_runs_from() -> None:
    roots = installation_roots()
    assert any(lies_inside(Path(sys.prefix).resolve(), root) for root in roots)
    # this checkout is installed editable (uv sync): its source tree is read-only too
    gateway = Path(installation.__file__).resolve()
    assert any(lies_inside(gateway, root) for root in roots)
    assert REPOSITORY in roots


def fake_python(prefix: Path, config: str | None = None) -> Path:
    """Make `prefix/bin/python` (an empty file), in a venv when `config` is given."""
    (prefix / "bin").mkdir(parents=True)
    python = prefix / "bin" / "python"
    python.write_text("")
    python.chmod(0o755)
    if config is not None:
        (prefix / "pyvenv.cfg").write_text(config)
    return python


def test_a_venvs_interpreter(tmp_path: Path) -> None:
    fake_python(tmp_path / "base")
    venv = fake_python(tmp_path / "venv", f"home = {tmp_path / 'base/bin'}\n")
    venv.unlink()
    venv.symlink_to(tmp_path / "base/bin/python")
    # the venv, its base (pyvenv.cfg's home) and where its executable really lies
    assert interpreter_roots([str(venv), "-m", "x"], cwd=Path("/")) == (
        tmp_path / "base",
        tmp_path / "venv",
    )


def test_an_interpreter_found_on_the_path_or_from_the_cwd(tmp_path: Path) -> None:
    python = fake_python(tmp_path / "env", "version = 3.11\n")  # a venv naming no home
    assert interpreter_roots(["python"], cwd=Path("/"), search_path=str(python.parent)) == (
        tmp_path / "env",
    )
    assert interpreter_roots(["env/bin/python"], cwd=tmp_path) == (tmp_path / "env",)
    assert interpreter_roots(["nowhere-to-be-found"], cwd=tmp_path, search_path="") == ()
    assert interpreter_roots([], cwd=tmp_path) == ()


def test_a_plain_interpreter_is_its_prefix(tmp_path: Path) -> None:
    python = fake_python(tmp_path / "opt" / "python3.12")
    assert interpreter_roots([str(python)], cwd=Path("/")) == (tmp_path / "opt" / "python3.12",)
    assert interpreter_roots(["/python"], cwd=Path("/")) == ()  # never the whole root


@pytest.mark.parametrize(
    ("config", "home"),
    [
        ("home = /usr/bin\ninclude-system-site-packages = false\n", "/usr/bin"),
        ("HOME=/opt/py/bin", "/opt/py/bin"),
        ("version = 3.11\n", None),
        ("home = relative/bin\n", None),
    ],
)
def test_venv_home(tmp_path: Path, config: str, home: str | None) -> None:
    (tmp_path / "pyvenv.cfg").write_text(config)
    assert venv_home(tmp_path / "pyvenv.cfg") == (Path(home) if home else None)


def test_a_pyvenv_cfg_that_is_no_file_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pyvenv.cfg")  # a kernel could put one where a venv's would be
    found: list[Path | None] = []
    reader = threading.Thread(target=lambda: found.append(venv_home(tmp_path / "pyvenv.cfg")))
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive() and found == [None]
    (tmp_path / "cfg-link").symlink_to(tmp_path / "pyvenv.cfg")
    assert venv_home(tmp_path / "cfg-link") is None
    assert venv_home(tmp_path / "missing") is None


# What the tests above leave open (each fails on a mutant of installation.py that
# bench/mutation.py found alive without it).
def test_an_editable_url_with_a_relative_path_names_no_tree() -> None:
    assert editable_url_root('{"url": "file:src/x", "dir_info": {"editable": true}}') is None


def test_an_editable_distribution_is_read_from_its_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "site" / "made_up_dist-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: made-up-dist\nVersion: 1.0\n")
    (info / "direct_url.json").write_text(
        '{"url": "file:///src/made-up", "dir_info": {"editable": true}}'
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert installation.editable_root("made-up-dist") == Path("/src/made-up")
    assert installation.editable_root("no-such-dist-at-all") is None


def test_the_dirs_a_package_is_imported_from() -> None:
    names = ["no_such_parent.child", "json", "os", "no_such_package_here"]  # two absent, a module
    assert installation.package_dirs(names) == [Path(json.__file__).parent]


def test_a_venv_of_copies_names_its_base_by_its_home(tmp_path: Path) -> None:
    fake_python(tmp_path / "base")
    venv = fake_python(tmp_path / "venv", f"home = {tmp_path / 'base/bin'}\n")  # not a link
    assert interpreter_roots([str(venv)], cwd=Path("/")) == (tmp_path / "base", tmp_path / "venv")


@pytest.mark.parametrize(
    ("config", "home"),
    [
        (b"home = /opt/py=3/bin\n", "/opt/py=3/bin"),  # split at the first "="
        (b"# \xff\xfe not UTF-8\nhome = /opt/py/bin\n", "/opt/py/bin"),
        (b"x = " + b"y" * installation.VENV_CONFIG_LIMIT + b"\nhome = /far/bin\n", None),
    ],
)
def test_what_a_pyvenv_cfg_says(tmp_path: Path, config: bytes, home: str | None) -> None:
    (tmp_path / "pyvenv.cfg").write_bytes(config)
    assert venv_home(tmp_path / "pyvenv.cfg") == (Path(home) if home else None)
