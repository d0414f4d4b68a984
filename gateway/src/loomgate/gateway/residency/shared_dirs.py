"""A kernel's own dir shared with its forks: a fork is a copy of its origin's process, so it
lives in its origin's dir (its sandbox, its homes, its packages dir) and, confined, in the same
sandbox. Who uses a dir is kept in files beside it (out of its kernels' reach, and read again by
a later gateway); the dir, and the sandbox, go with the last of them. In this gateway its users
hold one SandboxLaunch (one proxy, one init)."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from loomgate.gateway.sandbox import SandboxLaunch

# The sandboxes of this gateway's kernels that have forks, by their dir (a later gateway takes
# each user back from its own record: they find the one object here).
OPEN: dict[Path, SandboxLaunch] = {}


def users_dir(kernel_dir: Path) -> Path:
    """Return the dir that names the kernels using `kernel_dir`, one empty file each."""
    return kernel_dir.with_name(kernel_dir.name + ".kernels")


def join(kernel_dir: Path, kernel_id: str) -> None:
    """Note that kernel `kernel_id` uses `kernel_dir`."""
    users = users_dir(kernel_dir)
    users.mkdir(mode=0o700, exist_ok=True)
    (users / kernel_id).touch(mode=0o600)


def leave(kernel_dir: Path, kernel_id: str) -> bool:
    """Note that kernel `kernel_id` has ended; return whether others still use `kernel_dir`."""
    users = users_dir(kernel_dir)
    (users / kernel_id).unlink(missing_ok=True)
    if in_use(kernel_dir):
        return True
    with contextlib.suppress(OSError):
        users.rmdir()
    return False


def in_use(kernel_dir: Path, but: str | None = None) -> bool:
    """Return whether any kernel that joined, other than kernel `but`, uses `kernel_dir`."""
    users = users_dir(kernel_dir)
    return users.is_dir() and any(user.name != but for user in users.iterdir())


def shared(sandbox: SandboxLaunch) -> SandboxLaunch:
    """Return the one sandbox object this gateway holds for `sandbox`'s dir (`sandbox` itself
    the first time)."""
    return OPEN.setdefault(sandbox.directory, sandbox)


def close(kernel_dir: Path) -> None:
    """Forget the dir's sandbox object and its users (its last kernel ended)."""
    OPEN.pop(kernel_dir, None)
    shutil.rmtree(users_dir(kernel_dir), ignore_errors=True)
