"""What is said of notebooks, table-driven: a saved export (where, which cells), why a path was
refused, and where the agent's cells on an open notebook's kernel can be seen."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.shared import wire
from loomgate.translator.notebook_file import NotebookPathRefused
from loomgate.translator.presentation import (
    Audience,
    live_cells_line,
    live_cells_note,
    notebook_path_refusal,
    saved_note,
)


def book(*cells: dict[str, Any]) -> wire.Notebook:
    """Return a notebook of `cells`."""
    return wire.Notebook(nbformat=4, nbformat_minor=5, metadata={}, cells=list(cells))


def code(n: int) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": n}


NOTE = {"cell_type": "markdown"}


@pytest.mark.parametrize(
    ("notebook", "said"),
    [
        (book(code(7)), "Saved s.ipynb: 1 code cell (In [7])."),
        (book(code(7), NOTE), "Saved s.ipynb: 1 code cell (In [7]) and 1 markdown note."),
        (
            book(code(2), NOTE, code(3), NOTE, code(9)),
            "Saved s.ipynb: 3 code cells (In [2] to In [9]) and 2 markdown notes.",
        ),
        (book(), "Saved s.ipynb: a notebook with no cells (no execution was selected)."),
        (book(NOTE), "Saved s.ipynb: a notebook with no cells (no execution was selected)."),
    ],
)
def test_the_saved_note_names_the_cells(notebook: wire.Notebook, said: str) -> None:
    assert saved_note(notebook, "s.ipynb") == said


OUTSIDE = (
    "Not saved: ../x.ipynb is outside the working directory (/work); give a path inside it, "
    'e.g. save_notebook="session.ipynb".'
)
NOT_OURS = (
    "x.ipynb exists and is not a notebook loomgate exported; choose another name (an earlier "
    "export is replaced, any other file never)"
)


@pytest.mark.parametrize(
    ("refused", "audience", "said"),
    [
        (NotebookPathRefused("../x.ipynb", "outside", directory="/work"), "model", OUTSIDE),
        (NotebookPathRefused("../x.ipynb", "outside", directory="/work"), "person", OUTSIDE),
        (NotebookPathRefused("x.ipynb", "not_ours"), "model", f"Not saved: {NOT_OURS}."),
        (NotebookPathRefused("x.ipynb", "not_ours"), "person", f"not saved: {NOT_OURS}"),
        (
            NotebookPathRefused("x", "suffix"),
            "model",
            "Not saved: x does not end in .ipynb; give a notebook file name such as session.ipynb.",
        ),
        (
            NotebookPathRefused("/ro/x.ipynb", "unwritable", reason="Permission denied"),
            "person",
            "not saved: /ro/x.ipynb cannot be written: Permission denied",
        ),
    ],
)
def test_a_refused_path_says_why_and_what_to_do(
    refused: NotebookPathRefused, audience: Audience, said: str
) -> None:
    assert notebook_path_refusal(refused, audience) == said


@pytest.mark.parametrize(
    ("paths", "live", "said"),
    [
        (
            ["work/a.ipynb"],
            True,
            "Your cells also appear in work/a.ipynb while the person has it open in JupyterLab: "
            "new cells at its end, tagged loomgate-agent, their outputs filled in as they run.",
        ),
        (
            ["a.ipynb", "b.ipynb"],
            True,
            "Your cells also appear in a.ipynb and b.ipynb while the person has it open in "
            "JupyterLab: new cells at its end, tagged loomgate-agent, their outputs filled in as "
            "they run.",
        ),
        (
            ["a.ipynb", "b.ipynb"],
            False,
            "Your cells are not written into a.ipynb and b.ipynb; they stay in this kernel's "
            'records (read_output, status(save_notebook="session.ipynb"); for the person: '
            "loomgate export --kernel a.ipynb).",
        ),
    ],
)
def test_the_model_is_told_where_its_cells_can_be_seen(
    paths: list[str], live: bool, said: str
) -> None:
    assert live_cells_note(paths, live) == said


@pytest.mark.parametrize(
    ("on", "said"),
    [
        (
            True,
            "Live cells: on; with jupyter-collaboration installed, the agent's cells appear in "
            "the notebooks open on their kernels (tag loomgate-agent); "
            "`loomgate jupyter enable --no-live-cells` turns them off.",
        ),
        (False, "Live cells: off; the agent's cells stay in the records (`loomgate export`)."),
    ],
)
def test_the_jupyter_command_says_whether_live_cells_are_on(on: bool, said: str) -> None:
    assert live_cells_line(on) == said
