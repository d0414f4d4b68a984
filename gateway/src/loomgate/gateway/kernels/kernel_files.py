"""A kernel process's files beside its connection file: the connection file itself (it holds
the kernel's key) and the log of the kernel's own output, and how they go when it ends."""

from __future__ import annotations

import contextlib
from pathlib import Path

DEATH_LOG = "kernel.log"  # a dead kernel's own output, kept beside its records (and gone with them)


def output_log_of(connection_file: Path) -> Path:
    """Return the log of a kernel's own output: its connection file's name, ending `.log`."""
    return connection_file.with_name(connection_file.stem + ".log")


def remove_kernel_files(connection_file: str, keep_log_in: Path | None = None) -> None:
    """Remove an ended kernel's connection file (it holds the kernel's key) and its output log;
    with `keep_log_in` (a kernel that died: its last words), move the log there instead."""
    if not connection_file:
        return
    connection = Path(connection_file)
    log = output_log_of(connection)
    with contextlib.suppress(OSError):
        connection.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        if keep_log_in is not None and log.exists() and keep_log_in.is_dir():
            log.replace(keep_log_in / DEATH_LOG)
        else:
            log.unlink(missing_ok=True)
