"""The placeholders a sandbox makes in the person's writable dirs so that a protected name that
does not exist yet is a mount point (read-only inside): recorded before they are made, and
removed once their kernel has ended, unless another kernel still mounts on them.

A mount needs a name to mount on, and the name must exist in the person's directory: no mount
namespace, overlay or bind can make a name read-only there without it (overlayfs over a dir the
person keeps editing is undefined behaviour). So each missing protected path gets the least
visible placeholder that git and the programs reading it tolerate: an empty directory (git
neither lists nor commits one), inside `.git` an empty file where git reads a config.

Each kernel's record lies beside its own dir (in the dir holding every kernel's own dir), not in
it: a kernel's own dir is removed when it ends for good, so a record whose kernel dir is gone
belongs to a kernel that ended, and the next sandbox to start or end removes its placeholders,
whichever gateway runs it. Removing a placeholder while its sandbox runs would lift the mount on
it (Linux detaches a mount whose name is removed elsewhere).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast, get_args

from loomgate.shared import paths

__all__ = ["Kind", "make", "record_file", "remove"]

Kind = Literal["dir", "file"]
KINDS: tuple[Kind, ...] = get_args(Kind)
RECORD_PREFIX = ".placeholders-"  # + the kernel dir's name + ".json", beside it
LOCK = ".placeholders.lock"  # in the dir holding every kernel's own dir
DIR_MODE = 0o755


@dataclass
class Record:
    """What one kernel's sandbox made (and must remove) and every protected path it mounts on."""

    created: dict[str, Kind] = field(default_factory=dict)
    used: list[str] = field(default_factory=list)


def record_file(kernel_dir: Path) -> Path:
    """Return the file that records the placeholders of the kernel whose own dir is `kernel_dir`
    (beside it: it outlives that dir)."""
    return kernel_dir.parent / f"{RECORD_PREFIX}{kernel_dir.name}.json"


def make(kernel_dir: Path, wanted: Sequence[tuple[Path, Kind | None]]) -> list[Path]:
    """Make a placeholder for each path of `wanted` with a kind that does not exist (recorded
    before it is made); note every path of `wanted` as used by this kernel, so that the end of
    another kernel whose placeholder it is does not remove it from under this one (a restart
    reuses the record); first remove the placeholders of kernels that have ended. Return the
    paths made."""
    with locked(kernel_dir.parent):
        swept(kernel_dir.parent)
        record = read(record_file(kernel_dir))
        missing = [
            (path, kind) for path, kind in wanted if kind is not None and not os.path.lexists(path)
        ]
        used_now = [str(path) for path, _ in wanted]
        if missing or record.used != used_now:  # a restart in the same place writes nothing
            for path, kind in missing:
                record.created[str(path)] = kind
            record.used = used_now
            write(record_file(kernel_dir), record)
        made: list[Path] = []
        for path, kind in missing:
            # Where this user cannot make it (a dir not writable to it, a file on the way), the
            # kernel, which writes with this user's rights at most, cannot either.
            with contextlib.suppress(OSError):
                create(path, kind)
                made.append(path)
        return made


def remove(kernel_dir: Path) -> list[Path]:
    """Remove the placeholders the kernel's sandbox made, once it has ended for good (and those
    of other kernels that have ended): each one another kernel still mounts on is handed on to
    it instead, and each is removed only while it is still only a placeholder (an empty dir, an
    empty file). Return the paths removed."""
    with locked(kernel_dir.parent):
        removed = unmake(record_file(kernel_dir))
        return [*removed, *swept(kernel_dir.parent)]


def swept(kernels: Path) -> list[Path]:
    """Remove the placeholders of every kernel whose own dir in `kernels` is gone, the lock
    held; return the paths removed."""
    removed: list[Path] = []
    for record in records(kernels):
        kernel_dir = kernels / record.name[len(RECORD_PREFIX) : -len(".json")]
        if not kernel_dir.exists():
            removed += unmake(record)
    return removed


def unmake(record_path: Path) -> list[Path]:
    """Remove what the record `record_path` says its sandbox made (handing on what another
    kernel uses), then the record; the lock held. Return the paths removed."""
    record = read(record_path)
    users = {other: read(other) for other in records(record_path.parent) if other != record_path}
    removed: list[Path] = []
    for text, kind in record.created.items():
        user = next((u for u, r in users.items() if text in r.used), None)
        if user is not None:
            users[user].created[text] = kind
            write(user, users[user])
        elif removed_placeholder(Path(text), kind):
            removed.append(Path(text))
    record_path.unlink(missing_ok=True)
    return removed


def create(path: Path, kind: Kind) -> None:
    """Create the placeholder `path` of `kind` (FileExistsError when something is there)."""
    if kind == "dir":
        path.mkdir(mode=DIR_MODE)
        return
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))


def removed_placeholder(path: Path, kind: Kind) -> bool:
    """Remove `path` when it is still the placeholder of `kind`; return whether it was."""
    try:
        if kind == "dir":
            path.rmdir()  # only an empty dir: whatever was put in it since stays
            return True
        if path.is_symlink() or not path.is_file() or path.stat().st_size:
            return False
        path.unlink()
        return True
    except OSError:
        return False


def records(kernels: Path) -> list[Path]:
    """Return the records of the kernels whose own dirs lie in `kernels`."""
    try:
        return sorted(kernels.glob(f"{RECORD_PREFIX}*.json"))
    except OSError:
        return []


def read(record_path: Path) -> Record:
    """Return a record (empty when there is none or it cannot be read)."""
    try:
        data = json.loads(record_path.read_text())
    except (OSError, ValueError):
        return Record()
    if not isinstance(data, dict):
        return Record()
    created = data.get("created")
    used_paths = data.get("used")
    return Record(
        {
            str(path): cast(Kind, kind)
            for path, kind in (created.items() if isinstance(created, dict) else ())
            if kind in KINDS
        },
        [str(p) for p in used_paths] if isinstance(used_paths, list) else [],
    )


def write(record_path: Path, record: Record) -> None:
    """Write a record whole (a reader never sees half of it)."""
    partial = record_path.with_name(record_path.name + ".partial")
    partial.write_text(json.dumps({"created": record.created, "used": record.used}))
    partial.chmod(0o600)
    partial.replace(record_path)


def locked(kernels: Path) -> contextlib.AbstractContextManager[None]:
    """Hold the lock of the placeholders of every kernel whose own dir lies in `kernels`."""
    return paths.locked(kernels / LOCK)
