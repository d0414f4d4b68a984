"""Where a notebook may be saved, and what it may replace: the rules the CLI and the model's
`status(save_notebook=…)` share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loomgate.shared import wire
from loomgate.translator.notebook_file import NotebookPathRefused, inside, save_notebook
from loomgate.translator.presentation import notebook_path_refusal, saved_note

NOTEBOOK = wire.Notebook(
    nbformat=4,
    nbformat_minor=5,
    metadata={"loomgate": {"kernel": {"id": "k"}}},
    cells=[
        {"cell_type": "code", "execution_count": 3},
        {"cell_type": "markdown"},
        {"cell_type": "code", "execution_count": 4},
    ],
)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("session.ipynb", "session.ipynb"),
        ("work/deeper/session.ipynb", "work/deeper/session.ipynb"),
        ("./work/../session.ipynb", "session.ipynb"),
        ("ROOT/inside.ipynb", "inside.ipynb"),  # absolute, but inside
        ("../escaped.ipynb", "outside"),
        ("/etc/escaped.ipynb", "outside"),
        ("link/escaped.ipynb", "outside"),  # a symbolic link out of it
        ("notes.txt", "suffix"),
        ("session.IPYNB", "suffix"),
    ],
)
def test_a_path_is_kept_inside_the_directory(tmp_path: Path, path: str, allowed: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(tmp_path)
    path = path.replace("ROOT", str(root))
    if allowed in ("outside", "suffix"):
        with pytest.raises(NotebookPathRefused) as refused:
            inside(path, str(root))
        assert refused.value.why == allowed
    else:
        assert inside(path, str(root)) == root.resolve() / allowed


def test_an_earlier_export_is_replaced_and_any_other_file_never(tmp_path: Path) -> None:
    tmp_path = tmp_path / "saved"
    tmp_path.mkdir()
    target = tmp_path / "made" / "here.ipynb"
    save_notebook(target, NOTEBOOK)  # its folder made
    save_notebook(target, NOTEBOOK)  # an export replaces an export
    assert json.loads(target.read_text()) == NOTEBOOK
    theirs = tmp_path / "theirs.ipynb"
    for content in ('{"cells": [], "metadata": {}}', "not json", "[]"):
        theirs.write_text(content)
        with pytest.raises(NotebookPathRefused) as refused:
            save_notebook(theirs, NOTEBOOK)
        assert refused.value.why == "not_ours"
        assert theirs.read_text() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["made", "theirs.ipynb"]  # no tmp left


@pytest.fixture
def checked(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A working directory with a folder `work`, a dir outside it, and the path of
    `work/session.ipynb` as inside() checked it (before anything changes under it)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "work").mkdir(parents=True)
    outside.mkdir()
    return root, outside, inside("work/session.ipynb", str(root))


def test_a_folder_turned_into_a_link_after_the_check_is_not_followed(
    checked: tuple[Path, Path, Path],
) -> None:
    root, outside, path = checked
    (root / "work").rmdir()
    (root / "work").symlink_to(outside)  # what a kernel writing in the directory can do
    with pytest.raises(NotebookPathRefused) as refused:
        save_notebook(path, NOTEBOOK, within=str(root))
    assert (refused.value.why, refused.value.directory) == ("outside", str(root.resolve()))
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("there", [False, True])
def test_a_link_in_the_notebooks_place_is_neither_followed_nor_replaced(
    checked: tuple[Path, Path, Path], there: bool
) -> None:
    root, outside, path = checked
    victim = outside / "victim.ipynb"
    if there:  # an earlier export outside, which a followed link would overwrite
        save_notebook(victim, NOTEBOOK)
    before = victim.read_bytes() if there else None
    path.symlink_to(victim)
    with pytest.raises(NotebookPathRefused) as refused:
        save_notebook(path, NOTEBOOK, within=str(root))
    assert refused.value.why == "not_ours"
    assert path.is_symlink() and (victim.read_bytes() if there else None) == before
    assert sorted(p.name for p in outside.iterdir()) == (["victim.ipynb"] if there else [])
    assert [p.name for p in (root / "work").iterdir()] == ["session.ipynb"]  # no tmp left


def test_folders_are_made_inside_and_a_file_in_the_way_is_said(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    path = inside("a/b/session.ipynb", str(root))
    save_notebook(path, NOTEBOOK, within=str(root))
    assert json.loads(path.read_text()) == NOTEBOOK
    (root / "file").write_text("x")
    blocked = inside("file/session.ipynb", str(root))
    with pytest.raises(NotebookPathRefused) as refused:
        save_notebook(blocked, NOTEBOOK, within=str(root))
    assert (refused.value.why, refused.value.reason) == ("unwritable", "Not a directory")


@pytest.mark.parametrize(
    ("refused", "said"),
    [
        (
            NotebookPathRefused("x.txt", "suffix"),
            "not saved: x.txt does not end in .ipynb; give a notebook file name such as "
            "session.ipynb",
        ),
        (
            NotebookPathRefused("/ro/x.ipynb", "unwritable", reason="Read-only file system"),
            "not saved: /ro/x.ipynb cannot be written: Read-only file system",
        ),
    ],
)
def test_a_refusal_says_what_to_do(refused: NotebookPathRefused, said: str) -> None:
    assert notebook_path_refusal(refused, "person") == said
    assert notebook_path_refusal(refused, "model") == "N" + said[1:] + "."


def test_the_saved_note_counts_the_code_cells_and_the_notes() -> None:
    assert saved_note(NOTEBOOK, "s.ipynb") == (
        "Saved s.ipynb: 2 code cells (In [3] to In [4]) and 1 markdown note."
    )
    empty = wire.Notebook(nbformat=4, nbformat_minor=5, metadata={}, cells=[])
    assert saved_note(empty, "s.ipynb") == (
        "Saved s.ipynb: a notebook with no cells (no execution was selected)."
    )
