"""Saving an exported notebook as a file: the text Jupyter itself would save, written whole, and
never over a file that is not a notebook loomgate exported, nor through a symbolic link put in
its way after its path was checked (a kernel may write in the directory). The CLI and the MCP
server share it; presentation/ words its refusals."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
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
    try:
        target = (root / Path(path).expanduser()).resolve()
    except OSError as e:  # a link on the way changed while it was followed
        raise NotebookPathRefused(path, "unwritable", reason=e.strerror or str(e)) from None
    if target != root and root not in target.parents:
        raise NotebookPathRefused(path, "outside", directory=str(root))
    if target.suffix != SUFFIX:
        raise NotebookPathRefused(path, "suffix")
    return target


def exported_by_loomgate(folder: int, name: str) -> bool:
    """Return whether `name` in the open dir `folder` is a notebook loomgate exported (it may be
    replaced); a symbolic link there is not."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=folder)
    except OSError:
        return False
    try:
        with os.fdopen(fd, encoding="utf-8") as file:
            data = json.loads(file.read())
    except (OSError, ValueError):
        return False
    metadata = data.get("metadata") if isinstance(data, dict) else None
    return isinstance(metadata, dict) and isinstance(metadata.get("loomgate"), dict)


def save_notebook(path: Path, notebook: wire.Notebook, *, within: str | None = None) -> None:
    """Write `notebook` to `path` in one rename (its folders made as needed), refusing to
    replace any other file than an earlier export. With `within` (the directory inside()
    checked `path` against), each folder from there is opened without following a symbolic
    link, and the file is written beside its name in the last one and renamed onto it: a link
    put in the way after the check fails the save, never leads it out of `within`."""
    try:
        folder = open_folder(path, None if within is None else Path(within).resolve())
    except OSError as e:
        raise NotebookPathRefused(str(path), "unwritable", reason=e.strerror or str(e)) from None
    try:
        write_beside(folder, path, notebook)
    finally:
        os.close(folder)


def open_folder(path: Path, within: Path | None) -> int:
    """Return an open fd of the dir `path` goes in, made as needed: from `within` one folder at
    a time, never through a symbolic link (NotebookPathRefused "outside" when one is there)."""
    if within is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        parts = path.relative_to(within).parts[:-1]
    except ValueError:
        raise NotebookPathRefused(str(path), "outside", directory=str(within)) from None
    folder = os.open(within, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=folder)
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            except OSError:
                if not linked(folder, part):
                    raise
                raise NotebookPathRefused(str(path), "outside", directory=str(within)) from None
            os.close(folder)
            folder = inner
    except BaseException:
        os.close(folder)
        raise
    return folder


def write_beside(folder: int, path: Path, notebook: wire.Notebook) -> None:
    """Write `notebook` to a new file beside `path`'s name in the open dir `folder` and rename
    it onto that name (which a rename replaces, a link too, never follows)."""
    name = path.name
    if taken(folder, name) and not exported_by_loomgate(folder, name):
        raise NotebookPathRefused(str(path), "not_ours")
    tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(tmp, flags, 0o666, dir_fd=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(notebook_text(notebook))
        os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise NotebookPathRefused(str(path), "unwritable", reason=e.strerror or str(e)) from None


def linked(folder: int, name: str) -> bool:
    """Return whether `name` in the open dir `folder` is a symbolic link."""
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def taken(folder: int, name: str) -> bool:
    """Return whether anything (a link too) has `name` in the open dir `folder`."""
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
