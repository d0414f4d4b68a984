"""Saving an exported notebook as a file: the text Jupyter itself would save, written whole, and
never over a file that is not a notebook loomgate exported. The CLI and the MCP server share it;
presentation/ words its refusals."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from loomgate.shared import wire

SUFFIX = ".ipynb"


@dataclass
class NotebookPathRefused(Exception):
    """A path a notebook may not be saved to; `why` is one of the reasons below."""

    path: str
    why: str  # "outside" (the directory), "suffix" (not .ipynb), "not_ours", "unwritable"
    directory: str | None = None
    reason: str | None = None  # the system's, for "unwritable"

    def __str__(self) -> str:
        return f"{self.why}: {self.path}"


def notebook_text(notebook: wire.Notebook) -> str:
    """Return a notebook as Jupyter saves it (indent 1, sorted keys, UTF-8 kept)."""
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def inside(path: str, directory: str) -> Path:
    """Return `path` (relative to `directory`, or absolute) if it lies within `directory`,
    symbolic links followed, and names a .ipynb file; else NotebookPathRefused."""
    root = Path(directory).resolve()
    target = (root / Path(path).expanduser()).resolve()
    if target != root and root not in target.parents:
        raise NotebookPathRefused(path, "outside", directory=str(root))
    if target.suffix != SUFFIX:
        raise NotebookPathRefused(path, "suffix")
    return target


def exported_by_loomgate(path: Path) -> bool:
    """Return whether the file at `path` is a notebook loomgate exported (it may be replaced)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    metadata = data.get("metadata") if isinstance(data, dict) else None
    return isinstance(metadata, dict) and isinstance(metadata.get("loomgate"), dict)


def save_notebook(path: Path, notebook: wire.Notebook) -> None:
    """Write `notebook` to `path` in one rename (its folders made as needed), refusing to
    replace any other file than an earlier export."""
    if path.exists() and not exported_by_loomgate(path):
        raise NotebookPathRefused(str(path), "not_ours")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(notebook_text(notebook), encoding="utf-8")
        tmp.replace(path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise NotebookPathRefused(str(path), "unwritable", reason=e.strerror or str(e)) from None
