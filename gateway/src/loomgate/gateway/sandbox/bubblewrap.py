"""The bubblewrap (`bwrap`) command that confines a kernel to its `SandboxRules`, the kernel's
own host dir that command relies on, and signalling the sandbox from outside."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Sequence
from pathlib import Path

from loomgate.gateway.sandbox.profiles import SandboxRules, lies_inside

__all__ = [
    "ISOLATION",
    "command",
    "empty_file",
    "info_file",
    "interrupt",
    "ipc_dir",
    "kill",
    "packages_dir",
    "prepare_kernel_dir",
]

# Always: no capabilities (as root bwrap keeps them otherwise), no nested user namespace, own
# pid/ipc/uts namespaces, own session (no TIOCSTI into the gateway's terminal). Never
# --die-with-parent: kernels outlive the gateway.
ISOLATION = (
    "--unshare-user",
    "--disable-userns",
    "--cap-drop",
    "ALL",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--new-session",
)
TMP = Path("/tmp")
# The kernel's IPython dir, in its own /tmp: ~/.ipython is read-only in the sandbox, and IPython
# would otherwise make a new temp dir, with a warning, each time something asks for it.
IPYTHON_DIR = TMP / "ipython"
GIT_GUARDED = (".git/hooks", ".git/config")  # in a writable dir: kept read-only
PROC_READ_ONLY = (Path("/proc/sys"), Path("/proc/sysrq-trigger"))
HIDDEN_DIR_MODE = "0000"  # listing or entering it: PermissionError
PASSAGE_DIR_MODE = "0111"  # a hidden dir on the way to the kernel's own files: enter, not list


def empty_file(kernel_dir: Path) -> Path:
    """Return the mode-000 empty file bound over each hidden file."""
    return kernel_dir / "hidden"


def info_file(kernel_dir: Path) -> Path:
    """Return the file bwrap's `--info-fd` writes the sandbox init's host pid into."""
    return kernel_dir / "bwrap-info.json"


def ipc_dir(kernel_dir: Path) -> Path:
    """Return the dir for the kernel's ipc sockets (network off: no loopback to share), the
    only part of the kernel's own dir the sandbox sees (writable)."""
    return kernel_dir / "ipc"


def packages_dir(kernel_dir: Path) -> Path:
    """Return the dir `pip install` in the kernel installs into (first on its sys.path, kept
    across its restarts, removed with it), writable inside the sandbox."""
    return kernel_dir / "packages"


def prepare_kernel_dir(kernel_dir: Path) -> None:
    """Create the kernel's own host dir (mode 0700) with its empty file and ipc dir; before
    each start, as it also removes the last start's info file (whose pid is no longer ours)."""
    kernel_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    info_file(kernel_dir).unlink(missing_ok=True)
    kernel_dir.chmod(0o700)
    empty = empty_file(kernel_dir)
    empty.touch(mode=0o000, exist_ok=True)
    empty.chmod(0o000)
    ipc_dir(kernel_dir).mkdir(mode=0o700, exist_ok=True)
    packages_dir(kernel_dir).mkdir(mode=0o700, exist_ok=True)


def command(
    rules: SandboxRules,
    kernel_cmd: Sequence[str],
    *,
    bwrap: str,
    cwd: Path,
    kernel_dir: Path,
    connection_file: Path | None,
    unset_env: Iterable[str] = (),
    info_fd: int | None = None,
) -> list[str]:
    """Return the argv (starting with `bwrap`) that runs `kernel_cmd` under `rules` (writing
    the sandbox init's host pid into `info_fd`, when given).

    Later mounts lie over earlier ones: the read-only root, then /tmp, then the writable paths,
    then the hidden ones (hidden wins over writable; the kernel's own dir is always hidden),
    then the kernel's ipc dir and connection file (re-exposed through a hidden dir). Paths are
    bound at their real location, so a symlink to them (/var/run -> /run) leads to the bound
    one. A writable or hidden path that does not exist is skipped: nothing is there to reach,
    and bwrap would refuse it.
    """
    if not rules.confined:
        raise ValueError(f"profile {rules.profile!r} is not confined: run its kernel as it is")
    if not kernel_cmd:
        raise ValueError("the kernel command is empty: give the argv the sandbox should run")
    empty = empty_file(kernel_dir)
    if not empty.is_file():
        raise ValueError(f"{empty} is missing: call prepare_kernel_dir({str(kernel_dir)!r}) first")
    # Only the ipc dir of the kernel's own dir goes in: its info file names the pid the gateway
    # signals, and must not be the sandbox's to rewrite.
    own = [real(ipc_dir(kernel_dir)), real(packages_dir(kernel_dir))]
    own += [real(connection_file)] if connection_file is not None else []
    argv = [bwrap, *(["--info-fd", str(info_fd)] if info_fd is not None else []), *ISOLATION]
    if not rules.network:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # bwrap leaves these writable when they are not writable to it at that moment (a dir of
    # mode 0555); but the sandbox is host uid 0 when the gateway runs as root, and most sysctls
    # check only the file's owner (kernel.core_pattern would run a program as host root).
    for path in PROC_READ_ONLY:
        if path.exists():
            argv += ["--ro-bind", str(path), str(path)]
    argv += ["--perms", "1777", "--tmpfs", str(TMP)]
    for path in existing(rules.writable):
        argv += ["--bind", str(path), str(path)]
        # What git runs for you later (hooks, and config that names programs) stays read-only:
        # written from inside, it would run outside the sandbox at your next commit.
        for guarded in existing(path / part for part in GIT_GUARDED):
            argv += ["--ro-bind", str(guarded), str(guarded)]
    tmpfs: list[Path] = []
    for path in outermost(existing([*rules.hidden, kernel_dir])):
        argv += hide(path, own, empty, tmpfs)
    argv += ["--bind", str(own[0]), str(own[0]), "--bind", str(own[1]), str(own[1])]
    if connection_file is not None:
        argv += ["--ro-bind", str(own[2]), str(own[2])]
    # Read-only last: bwrap made the mount points of the re-exposed paths inside them first.
    for path in tmpfs:
        argv += ["--remount-ro", str(path)]
    argv += ["--setenv", "TMPDIR", str(TMP), "--setenv", "IPYTHONDIR", str(IPYTHON_DIR)]
    for name in dict.fromkeys(unset_env):
        argv += ["--unsetenv", name]
    argv += ["--chdir", str(cwd), "--", *kernel_cmd]
    return argv


def hide(path: Path, own: list[Path], empty: Path, tmpfs: list[Path]) -> list[str]:
    """Return the bwrap arguments that hide `path` (adding the dirs it covers to `tmpfs`).

    A hidden dir on the way to the kernel's own files is made enterable (not listable), and
    what it holds now is hidden in turn, so reading it gives PermissionError as anywhere
    hidden; a name created there later is simply not found.
    """
    if not path.is_dir():
        return ["--ro-bind", str(empty), str(path)]
    tmpfs.append(path)
    if not any(within(o, path) for o in own):
        return ["--perms", HIDDEN_DIR_MODE, "--tmpfs", str(path)]
    argv = ["--perms", PASSAGE_DIR_MODE, "--tmpfs", str(path)]
    for child in sorted(path.iterdir()):
        # A symlink is not copied into the tmpfs: its name is simply not found there.
        if not child.is_symlink() and child not in own:
            argv += hide(child, own, empty, tmpfs)
    return argv


def real(path: Path) -> Path:
    """Return `path` with every symlink resolved (bwrap mounts on real locations)."""
    return Path(os.path.realpath(path))


def existing(paths: Iterable[Path]) -> list[Path]:
    """Return the real locations of `paths` that exist, once each, in order."""
    found = (real(path) for path in paths)
    return list(dict.fromkeys(path for path in found if path.exists()))


def within(path: Path, top: Path) -> bool:
    """Return whether `path` is `top` or lies under it."""
    return lies_inside(path, top)


def outermost(paths: list[Path]) -> list[Path]:
    """Return `paths` without those under another of them (hiding the outer one hides them)."""
    return [p for p in paths if not any(o != p and within(p, o) for o in paths)]


def interrupt(init_pid: int) -> None:
    """Send SIGINT to the sandbox's process group (the kernel is in its init's, by
    --new-session; bwrap's own group, which jupyter_client signals, does not hold it)."""
    os.killpg(init_pid, signal.SIGINT)


def kill(init_pid: int) -> None:
    """End the whole sandbox: SIGKILL to its init ends its pid namespace (killing bwrap alone
    would leave the sandbox running)."""
    os.kill(init_pid, signal.SIGKILL)
