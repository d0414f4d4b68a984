"""What is said of notebooks: an exported one (where it was saved and what it holds, and why it
could not be saved there), and the person's open notebook the agent's cells appear in, or not."""

from __future__ import annotations

from loomgate.shared import wire
from loomgate.translator.notebook_file import NotebookPathRefused
from loomgate.translator.presentation.audience import Audience


def saved_note(notebook: wire.Notebook, path: str) -> str:
    """Return the line saying a notebook was saved: where, and which cells it holds."""
    numbers = [c["execution_count"] for c in notebook["cells"] if c["cell_type"] == "code"]
    if not numbers:
        return f"Saved {path}: a notebook with no cells (no execution was selected)."
    span = f"In [{numbers[0]}]" if len(numbers) == 1 else f"In [{numbers[0]}] to In [{numbers[-1]}]"
    cells = "cell" if len(numbers) == 1 else "cells"
    notes = len(notebook["cells"]) - len(numbers)
    extra = f" and {notes} markdown note{'s' if notes != 1 else ''}" if notes else ""
    return f"Saved {path}: {len(numbers)} code {cells} ({span}){extra}."


def notebook_path_refusal(refused: NotebookPathRefused, audience: Audience) -> str:
    """Return why the notebook was not saved at the path, and what to do instead."""
    path = refused.path
    if refused.why == "outside":  # only the model's paths are held to a directory
        return (
            f"Not saved: {path} is outside the working directory ({refused.directory}); give "
            'a path inside it, e.g. save_notebook="session.ipynb".'
        )
    if refused.why == "suffix":
        text = f"{path} does not end in .ipynb; give a notebook file name such as session.ipynb"
    elif refused.why == "not_ours":
        text = (
            f"{path} exists and is not a notebook loomgate exported; choose another name "
            "(an earlier export is replaced, any other file never)"
        )
    else:
        text = f"{path} cannot be written: {refused.reason}"
    return f"Not saved: {text}." if audience == "model" else f"not saved: {text}"


def live_cells_note(paths: list[str], live: bool) -> str:
    """Return where the model's cells on the kernel of the notebooks `paths` can be seen: in the
    notebook itself while it is open (`live`), else only in the kernel's records."""
    notebooks = " and ".join(paths)
    if live:
        return (
            f"Your cells also appear in {notebooks} while the person has it open in JupyterLab: "
            "new cells at its end, tagged loomgate-agent, their outputs filled in as they run."
        )
    return (
        f"Your cells are not written into {notebooks}; they stay in this kernel's records "
        '(read_output, status(save_notebook="session.ipynb"); for the person: '
        f"loomgate export --kernel {paths[0]})."
    )


def live_cells_line(on: bool) -> str:
    """Return what `loomgate jupyter enable|status` says of live cells."""
    if on:
        return (
            "Live cells: on; with jupyter-collaboration installed, the agent's cells appear in "
            "the notebooks open on their kernels (tag loomgate-agent); "
            "`loomgate jupyter enable --no-live-cells` turns them off."
        )
    return "Live cells: off; the agent's cells stay in the records (`loomgate export`)."
