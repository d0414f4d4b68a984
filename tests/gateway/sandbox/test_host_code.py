"""What in a writable dir the person's tools run later (sandbox/policy/host_code.py), found on
real trees: venvs by their pyvenv.cfg, node_modules, bytecode caches, the caches made where
there is source without one, to a depth and a count of dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.policy import host_code as module
from loomgate.gateway.sandbox.policy.host_code import host_code


def lay(top: Path, *names: str) -> None:
    """Make each file of `names` (a name ending in / is a dir) under `top`."""
    for name in names:
        path = top / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")


@pytest.mark.parametrize(
    ("names", "kept", "made"),
    [
        ((), [], []),
        (("a.py",), [], ["__pycache__"]),
        (("a.py", "__pycache__/a.pyc"), ["__pycache__"], []),
        # a venv by its mark, whatever its name; nothing below it is looked at
        (("tools/pyvenv.cfg", "tools/lib/x.py"), ["tools"], []),
        # and the walk goes on past it
        (("a/pyvenv.cfg", "b/x.py"), ["a"], ["b/__pycache__"]),
        # the writable dir itself is never kept whole, even when it is a venv
        (("pyvenv.cfg", "x.py"), [], ["__pycache__"]),
        (("web/node_modules/a/b.js", "web/app.js"), ["web/node_modules"], []),
        # .git is guarded on its own
        ((".git/hooks/x.py",), [], []),
        # a link to a dir is not followed
        (("real/x.py",), [], ["real/__pycache__"]),
    ],
    ids=["empty", "source", "cache", "venv", "venv then", "top venv", "node_modules", "git", "dir"],
)
def test_what_is_kept_and_made(
    tmp_path: Path, names: tuple[str, ...], kept: list[str], made: list[str]
) -> None:
    top = tmp_path / "w"
    top.mkdir()
    lay(top, *names)
    (top / "link").symlink_to(tmp_path)
    found = host_code(top)
    assert [str(p.relative_to(top)) for p in found.kept] == kept
    assert [str(p.relative_to(top)) for p in found.made] == made
    assert not found.cut


def test_the_walk_stops_at_its_depth(tmp_path: Path) -> None:
    deep = "/".join(f"d{i}" for i in range(module.MAX_DEPTH + 1))
    lay(tmp_path, f"{deep}/x.py", "d0/y.py")
    found = host_code(tmp_path)
    assert [str(p.relative_to(tmp_path)) for p in found.made] == ["d0/__pycache__"]


def test_the_walk_looks_into_the_dirs_at_its_depth_and_no_deeper(tmp_path: Path) -> None:
    last = "/".join(f"d{i}" for i in range(module.MAX_DEPTH))  # at MAX_DEPTH below tmp_path
    lay(tmp_path, f"{last}/x.py", f"{last}/node_modules/", f"{last}/d/x.py")
    found = host_code(tmp_path)
    assert [str(p.relative_to(tmp_path)) for p in found.kept] == [f"{last}/node_modules"]
    assert [str(p.relative_to(tmp_path)) for p in found.made] == [f"{last}/__pycache__"]


def test_a_dir_gone_before_it_is_looked_at_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lay(tmp_path, "a/", "b/x.py")
    scandir = os.scandir

    def racing(path: Path) -> Iterator[os.DirEntry[str]]:
        """Remove a/ just before it is listed, as another process might."""
        if path == tmp_path / "a":
            path.rmdir()
        return scandir(path)

    with monkeypatch.context() as patched:
        patched.setattr(os, "scandir", racing)
        found = host_code(tmp_path)
    assert [str(p.relative_to(tmp_path)) for p in found.made] == ["b/__pycache__"]


def test_the_walk_stops_at_its_count_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(module, "MAX_DIRS", 3)
    lay(tmp_path, "a/x.py", "b/x.py", "c/x.py", "d/x.py")
    found = host_code(tmp_path)
    assert found.cut
    assert [p.parent.name for p in found.made] == ["a", "b"]
