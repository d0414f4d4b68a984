"""The rules that allow everything of a grant but its hidden paths, walked over a described tree
(and once over a real one); no process runs."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement.landlock_paths import (
    entries,
    on_the_way,
    path_rules,
    real,
)

R, W = 1, 2  # two rights, told apart
# A described file system: each dir and its entries (symlinks are not listed, as `entries`).
TREE = {
    "/": ["bin", "etc", "home", "tmp", "usr"],
    "/home": ["p"],
    "/home/p": [".bashrc", ".ssh", ".config", "project"],
    "/home/p/.config": ["gh", "git", "nvim"],
    "/home/p/project": [".env", "src", "README"],
    "/tmp": ["loomgate-0", "x"],
    "/tmp/loomgate-0": ["k1", "k2"],
    "/tmp/loomgate-0/k1": ["ipc", "tmp", "hidden"],
}


def children(directory: Path) -> Iterable[Path]:
    """Return the described entries of `directory`."""
    return [directory / name for name in TREE.get(str(directory), [])]


def rules(grants: list[tuple[str, int]], hidden: list[str]) -> dict[str, int]:
    """Return path_rules over TREE, keyed by text."""
    found = path_rules([(Path(p), r) for p, r in grants], [Path(h) for h in hidden], children)
    return {str(path): rights for path, rights in found}


@pytest.mark.parametrize(
    ("grants", "hidden", "expected"),
    [
        # Nothing hidden inside: the grant itself.
        ([("/", R)], [], {"/": R}),
        ([("/usr", R)], ["/home/p/.ssh"], {"/usr": R}),
        # One hidden path: every entry beside the way to it.
        (
            [("/", R)],
            ["/home/p/.ssh"],
            {
                "/bin": R,
                "/etc": R,
                "/tmp": R,
                "/usr": R,
                "/home/p/.bashrc": R,
                "/home/p/.config": R,
                "/home/p/project": R,
            },
        ),
        # A hidden path not there yet: its dir's entries are granted one by one, so a name made
        # there later has no right.
        (
            [("/", R)],
            ["/home/p/.netrc", "/home/p/.config/gh"],
            {
                "/bin": R,
                "/etc": R,
                "/tmp": R,
                "/usr": R,
                "/home/p/.bashrc": R,
                "/home/p/.ssh": R,
                "/home/p/.config/git": R,
                "/home/p/.config/nvim": R,
                "/home/p/project": R,
            },
        ),
        # A hidden path inside a writable one, and grants inside hidden ones (the kernel's own).
        (
            [("/", R), ("/home/p/project", R | W), ("/tmp/loomgate-0/k1/ipc", R | W)],
            ["/tmp", "/home/p/project/.env", "/home/p/.ssh"],
            {
                "/bin": R,
                "/etc": R,
                "/usr": R,
                "/home/p/.bashrc": R,
                "/home/p/.config": R,
                "/home/p/project/src": R | W,
                "/home/p/project/README": R | W,
                "/tmp/loomgate-0/k1/ipc": R | W,
            },
        ),
        # A grant equal to a hidden path holds (it is not cut by itself).
        ([("/tmp/loomgate-0/k1", W)], ["/tmp/loomgate-0/k1"], {"/tmp/loomgate-0/k1": W}),
        # The same path from two grants gets both rights.
        ([("/usr", R), ("/usr", W)], [], {"/usr": R | W}),
        # A hidden path that is a grant's dir on the way to another: nothing under it.
        ([("/", R)], ["/home", "/home/p/.ssh"], {"/bin": R, "/etc": R, "/tmp": R, "/usr": R}),
    ],
)
def test_a_grant_is_given_beside_its_hidden_paths(
    grants: list[tuple[str, int]], hidden: list[str], expected: dict[str, int]
) -> None:
    assert rules(grants, hidden) == expected


@pytest.mark.parametrize(
    ("grants", "hidden", "way"),
    [
        (["/home/p/project"], ["/home/p/project/.env"], ["/home/p/project"]),
        (
            ["/home/p/project"],
            ["/home/p/project/a/b/c"],
            ["/home/p/project", "/home/p/project/a", "/home/p/project/a/b"],
        ),
        (["/home/p/project"], ["/home/p/.ssh", "/home/p/project"], []),
        (
            ["/srv", "/home/p/project"],
            ["/srv/x/.env", "/home/p/project/.env"],
            ["/home/p/project", "/srv", "/srv/x"],
        ),
        ([], ["/home/p/.ssh"], []),
    ],
)
def test_the_dirs_that_lose_rights_of_their_own(
    grants: list[str], hidden: list[str], way: list[str]
) -> None:
    found = on_the_way([Path(g) for g in grants], [Path(h) for h in hidden])
    assert found == [Path(w) for w in way]


def test_entries_leave_symlinks_out_and_a_dir_that_cannot_be_listed_is_empty(
    tmp_path: Path,
) -> None:
    tmp_path = tmp_path / "tree"  # beside the test's config dir
    tmp_path.mkdir()
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    assert sorted(entries(tmp_path)) == [tmp_path / "dir", tmp_path / "file"]
    assert entries(tmp_path / "file") == [] and entries(tmp_path / "missing") == []


def test_a_real_walk_and_real_paths(tmp_path: Path) -> None:
    tmp_path = tmp_path / "tree"  # beside the test's config dir
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / "notes").write_text("")
    (tmp_path / "alias").symlink_to(tmp_path / "home")
    hidden = [real(tmp_path / "alias" / ".ssh")]  # named through a symlink: its real place
    assert hidden == [tmp_path / "home" / ".ssh"]
    assert real(tmp_path / "alias" / "not-yet") == tmp_path / "home" / "not-yet"
    found = path_rules([(tmp_path, R)], hidden)
    assert found == [(tmp_path / "home" / "notes", R)]  # the symlink has no rule
    assert (tmp_path / "alias").is_symlink()


def test_a_grant_that_is_itself_hidden_loses_nothing_the_root_too() -> None:
    """(A row the table above lacks: it fails on a mutant of landlock_paths.py.)"""
    assert on_the_way([Path("/")], [Path("/")]) == []
    assert on_the_way([Path("/srv")], [Path("/srv"), Path("/srv/x/.env")]) == [
        Path("/srv"),
        Path("/srv/x"),
    ]
