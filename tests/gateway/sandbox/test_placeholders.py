"""The placeholders a sandbox makes for protected names that do not exist yet: recorded before
they are made, removed once their kernel ended (its own dir gone) while they are still only
placeholders, handed on to another kernel that still mounts on them."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import placeholders
from loomgate.gateway.sandbox.confinement.placeholders import Kind


@pytest.fixture
def place(tmp_path: Path) -> tuple[Path, Path]:
    """A project and the dir holding the kernels' own dirs."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    kernels = tmp_path / "kernels"
    for kernel in ("k1", "k2"):
        (kernels / kernel).mkdir(parents=True)
    return project, kernels


def wanted(project: Path) -> list[tuple[Path, Kind]]:
    """One protected path of each kind."""
    return [(project / ".vscode", "dir"), (project / ".git/config.worktree", "file")]


def names(directory: Path) -> list[str]:
    """Return what `directory` holds."""
    return sorted(p.name for p in directory.iterdir())


def test_missing_ones_are_made_and_recorded(place: tuple[Path, Path]) -> None:
    project, kernels = place
    (project / ".envrc").write_text("kept")
    made = placeholders.make(kernels / "k1", [*wanted(project), (project / ".envrc", "dir")])
    assert made == [path for path, _ in wanted(project)]
    assert (project / ".vscode").is_dir() and not any((project / ".vscode").iterdir())
    assert (project / ".git/config.worktree").read_text() == ""  # an empty config for git
    assert (project / ".envrc").read_text() == "kept"
    record = json.loads(placeholders.record_file(kernels / "k1").read_text())
    assert record["created"] == {str(path): kind for path, kind in wanted(project)}
    assert record["used"] == [str(p) for p, _ in wanted(project)] + [str(project / ".envrc")]


def test_they_are_removed_while_still_placeholders(place: tuple[Path, Path]) -> None:
    project, kernels = place
    placeholders.make(kernels / "k1", wanted(project))
    (project / ".vscode" / "settings.json").write_text("{}")  # the person's, since
    assert placeholders.remove(kernels / "k1") == [project / ".git/config.worktree"]
    assert (project / ".vscode" / "settings.json").read_text() == "{}"
    assert names(project / ".git") == []
    assert not placeholders.record_file(kernels / "k1").exists()


def test_a_file_that_became_something_else_is_kept(place: tuple[Path, Path]) -> None:
    project, kernels = place
    path = project / ".git" / "config.worktree"
    placeholders.make(kernels / "k1", [(path, "file")])
    path.write_text("[core]\n")
    assert placeholders.remove(kernels / "k1") == []
    assert path.read_text() == "[core]\n"


def test_a_restart_keeps_what_the_first_start_made(place: tuple[Path, Path]) -> None:
    project, kernels = place
    placeholders.make(kernels / "k1", wanted(project))
    record = placeholders.record_file(kernels / "k1").stat().st_mtime_ns
    assert placeholders.make(kernels / "k1", wanted(project)) == []  # all there now
    assert placeholders.record_file(kernels / "k1").stat().st_mtime_ns == record  # not rewritten
    assert len(placeholders.remove(kernels / "k1")) == 2


def test_one_another_kernel_still_mounts_on_is_handed_on(place: tuple[Path, Path]) -> None:
    project, kernels = place
    placeholders.make(kernels / "k1", wanted(project))
    placeholders.make(kernels / "k2", wanted(project)[:1])  # found, not made
    assert placeholders.remove(kernels / "k1") == [project / ".git/config.worktree"]
    assert (project / ".vscode").is_dir()  # k2's sandbox still mounts on it
    assert placeholders.remove(kernels / "k2") == [project / ".vscode"]
    assert not (project / ".vscode").exists()


def test_one_another_kernel_mounts_on_without_making_is_handed_on(
    place: tuple[Path, Path],
) -> None:
    project, kernels = place
    cache = project / "__pycache__"
    placeholders.make(kernels / "k1", [(cache, "dir")])
    # k2 found the cache and keeps it read-only as it is: it would never make one there.
    assert placeholders.make(kernels / "k2", [(cache, None), (project / "venv", None)]) == []
    assert not (project / "venv").exists()
    assert placeholders.remove(kernels / "k1") == []
    assert cache.is_dir()  # k2's sandbox still mounts on it
    assert placeholders.remove(kernels / "k2") == [cache]


def test_a_kernel_whose_own_dir_is_gone_has_ended(place: tuple[Path, Path]) -> None:
    """Its gateway removed its dir (or died after): the next sandbox's start or end removes
    what it made."""
    project, kernels = place
    placeholders.make(kernels / "k1", wanted(project))
    assert placeholders.remove(kernels / "k0") == []  # another kernel's end: k1 runs
    shutil.rmtree(kernels / "k1")
    placeholders.make(kernels / "k2", [(project / ".idea", "dir")])
    assert names(project) == [".git", ".idea"]
    assert not placeholders.record_file(kernels / "k1").exists()
    shutil.rmtree(kernels / "k2")
    assert placeholders.remove(kernels / "k0") == [project / ".idea"]
    assert names(project) == [".git"]


def test_an_unreadable_record_is_an_empty_one(place: tuple[Path, Path]) -> None:
    _, kernels = place
    placeholders.record_file(kernels / "k1").write_text("{not json")
    assert placeholders.remove(kernels / "k1") == []
    placeholders.record_file(kernels / "k2").write_text('{"created": {"/etc": "socket"}}')
    assert placeholders.remove(kernels / "k2") == []  # an unknown kind is never acted on


def test_one_that_cannot_be_made_is_skipped(place: tuple[Path, Path]) -> None:
    project, kernels = place
    (project / "file").write_text("x")
    made = placeholders.make(kernels / "k1", [(project / "file" / "x", "dir"), *wanted(project)])
    assert made == [path for path, _ in wanted(project)]  # the others are still made
    assert (project / "file").read_text() == "x"


# What the tests above leave open (each test fails on a mutant of placeholders.py that
# bench/mutation.py found alive without it).
def test_a_placeholder_file_is_made_new_and_never_through_a_symlink(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    kept.write_text("the person's")
    with pytest.raises(FileExistsError):
        placeholders.create(kept, "file")
    assert kept.read_text() == "the person's"
    planted = tmp_path / "planted"
    planted.symlink_to(tmp_path / "elsewhere")  # dangling: a create through it would make it
    with pytest.raises(FileExistsError):
        placeholders.create(planted, "file")
    assert not (tmp_path / "elsewhere").exists()
    placeholders.create(tmp_path / "made", "file")
    assert stat.S_IMODE((tmp_path / "made").stat().st_mode) & 0o133 == 0  # rw-r--r-- at most


def test_a_record_is_the_gateways_alone(place: tuple[Path, Path]) -> None:
    project, kernels = place
    placeholders.make(kernels / "k1", wanted(project))
    assert stat.S_IMODE(placeholders.record_file(kernels / "k1").stat().st_mode) == 0o600


@pytest.mark.parametrize("data", [{"created": ["/etc/passwd"]}, {"created": None}, {}])
def test_a_record_without_a_table_of_created_paths_still_says_what_is_used(
    place: tuple[Path, Path], data: dict[str, object]
) -> None:
    project, kernels = place
    vscode = project / ".vscode"
    placeholders.record_file(kernels / "k1").write_text(json.dumps({**data, "used": [str(vscode)]}))
    assert placeholders.make(kernels / "k2", [(vscode, "dir")]) == [vscode]
    assert placeholders.remove(kernels / "k2") == []  # k1 still mounts on it: handed on
    assert vscode.is_dir()
    assert placeholders.remove(kernels / "k1") == [vscode]


def test_removing_what_a_kernel_never_recorded_is_nothing(place: tuple[Path, Path]) -> None:
    _, kernels = place
    assert placeholders.remove(kernels / "k1") == []
    assert not placeholders.record_file(kernels / "k1").exists()


@pytest.mark.parametrize("became", ["a symlink to an empty file", "a FIFO"])
def test_a_file_placeholder_that_became_another_kind_is_kept(
    place: tuple[Path, Path], became: str
) -> None:
    project, kernels = place
    path = project / ".git" / "config.worktree"
    placeholders.make(kernels / "k1", [(path, "file")])
    path.unlink()
    if became == "a FIFO":
        os.mkfifo(path)
    else:
        (project / "empty").write_text("")
        path.symlink_to(project / "empty")
    assert placeholders.remove(kernels / "k1") == []
    assert os.path.lexists(path)


def test_the_next_start_removes_what_every_ended_kernel_made(place: tuple[Path, Path]) -> None:
    project, kernels = place
    placeholders.make(kernels / "k1", [(project / ".idea", "dir")])
    placeholders.make(kernels / "k2", [(project / ".vscode", "dir")])
    shutil.rmtree(kernels / "k1")
    shutil.rmtree(kernels / "k2")
    assert placeholders.make(kernels / "k3", []) == []
    assert names(project) == [".git"]
    assert list(kernels.glob(".placeholders-*.json")) == []  # k3 made none: nothing to record


# ---- Mutation testing (bench/mutation.py, issue 42): a mutant of placeholders.py that lived
# without this test (swept() keeping only the last ended kernel's paths). ----
def test_an_end_says_every_placeholder_of_ended_kernels_it_removed(
    place: tuple[Path, Path],
) -> None:
    project, kernels = place
    placeholders.make(kernels / "k1", [(project / ".idea", "dir")])
    placeholders.make(kernels / "k2", [(project / ".vscode", "dir")])
    shutil.rmtree(kernels / "k1")
    shutil.rmtree(kernels / "k2")
    assert sorted(placeholders.remove(kernels / "k3")) == [project / ".idea", project / ".vscode"]
