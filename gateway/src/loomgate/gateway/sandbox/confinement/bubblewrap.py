"""The bubblewrap (`bwrap`) command that confines a kernel to its `SandboxRules`, the kernel's
own host dir that command relies on, and signalling the sandbox from outside."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from loomgate.gateway.sandbox.confinement import placeholders
from loomgate.gateway.sandbox.confinement.kernel_homes import homes_dir, prepare_homes
from loomgate.gateway.sandbox.confinement.placeholders import Kind
from loomgate.gateway.sandbox.network.kernel_network import (
    BRIDGE_PORT,
    UNSET,
    bridged,
    net_dir,
    place_scripts,
    proxy_environment,
    relayed,
)
from loomgate.gateway.sandbox.policy.home_view import HomeView, kernel_home_view
from loomgate.gateway.sandbox.policy.host_code import MAX_DIRS, PYCACHE, host_code
from loomgate.gateway.sandbox.policy.installation import installation_roots, interpreter_roots
from loomgate.gateway.sandbox.policy.profiles import SandboxRules, lies_inside
from loomgate.gateway.sandbox.policy.protected_names import (
    GIT,
    symlinked_protections,
    unprotectable,
)

log = logging.getLogger(__name__)

__all__ = [
    "ISOLATION",
    "command",
    "command_status",
    "empty_file",
    "info_file",
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
    prepare_homes(kernel_dir)


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
    relay: Sequence[tuple[Path, int]] = (),
) -> list[str]:
    """Return the argv (starting with `bwrap`) that runs `kernel_cmd` under `rules` (writing
    the sandbox init's host pid into `info_fd`, when given), after making the placeholders its
    protected paths that do not exist yet need (placeholders.py; recorded beside `kernel_dir`)
    and copying the bridge's and the relay's scripts where it runs them (kernel_network.py);
    a kernel that takes only TCP is reached from its ipc dir through the `relay` routes (each
    unix socket there joined to a port on its own loopback).

    Later mounts lie over earlier ones: the read-only root, then /tmp (with the interpreter's
    prefixes and loomgate's installation that lie under the host's /tmp, read-only), then the
    writable paths, what stays read-only inside them (each `.git`'s parts, the protected names,
    the environment the kernel runs on and loomgate's installation), then the hidden ones
    (hidden wins over writable; the kernel's own dir is always hidden), then the kernel's ipc
    dir and connection file (re-exposed through a hidden dir). Paths are bound at their real
    location, so a symlink to them (/var/run -> /run) leads to the bound one. A writable or
    hidden path that does not exist is skipped: nothing is there to reach, and bwrap would
    refuse it.
    """
    if not rules.confined:
        raise ValueError(f"profile {rules.profile!r} is not confined: run its kernel as it is")
    if not kernel_cmd:
        raise ValueError("the kernel command is empty: give the argv the sandbox should run")
    empty = empty_file(kernel_dir)
    if not empty.is_file():
        raise ValueError(f"{empty} is missing: call prepare_kernel_dir({str(kernel_dir)!r}) first")
    # What loomgate runs from stays read-only, and a writable path inside it is left out, also
    # when `rules` were made before (a kernel taken back); the kernel's own interpreter is made
    # read-only where it lies in a writable path, and visible (as loomgate's installation is)
    # where it lies under the host's /tmp.
    own_installation = existing(installation_roots())
    installed = existing([*rules.read_only, *own_installation])
    proxied = rules.network.proxied
    # The bridge to the kernel's proxy and the relay to its ports run on the gateway's Python.
    runs = [kernel_cmd, *([[sys.executable]] if proxied or relay else [])]
    interpreter = existing([r for cmd in runs for r in interpreter_roots(cmd, cwd=cwd)])
    environment = existing([*installed, *interpreter])
    writable = [w for w in existing(rules.writable) if not any(within(w, e) for e in installed)]
    linked = symlinked_protections(writable, rules.protected)
    if linked:
        raise ValueError(unprotectable(rules.profile, *linked[0]))
    # Only these parts of the kernel's own dir go in: its info file names the pid the gateway
    # signals, and must not be the sandbox's to rewrite. Its proxy's socket is the gateway's,
    # and so are the scripts of the bridge and the relay, run from there.
    own_writable = [real(part(kernel_dir)) for part in (ipc_dir, packages_dir, homes_dir)]
    if proxied or relay:
        place_scripts(kernel_dir)
    own_readable = [real(net_dir(kernel_dir))] if proxied or relay else []
    own_readable += [real(connection_file)] if connection_file is not None else []
    own = [*own_writable, *own_readable]
    argv = [bwrap, *(["--info-fd", str(info_fd)] if info_fd is not None else []), *ISOLATION]
    if not rules.network.host:  # a network namespace of its own: only loopback, empty
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    # bwrap leaves these writable when they are not writable to it at that moment (a dir of
    # mode 0555); but the sandbox is host uid 0 when the gateway runs as root, and most sysctls
    # check only the file's owner (kernel.core_pattern would run a program as host root).
    for path in PROC_READ_ONLY:
        if path.exists():
            argv += ["--ro-bind", str(path), str(path)]
    view = kernel_home_view(rules.hidden, rules.readable)
    tmpfs: list[Path] = []
    argv += home_arguments(view, [e for e in environment if within(e, view.home)], tmpfs)
    argv += ["--perms", "1777", "--tmpfs", str(TMP)]
    inside = [e for e in environment if any(within(e, w) for w in writable)]
    # loomgate's own installation too: an ipykernel runs its copy launcher from there.
    for path in outermost([*interpreter, *own_installation]):
        if within(path, TMP) and path not in inside:
            argv += ["--ro-bind", str(path), str(path)]
    for path in writable:
        argv += ["--bind", str(path), str(path)]
    guards = [g for top in writable for g in guarded(top, rules.protected, writable)]
    placeholders.make(kernel_dir, guards)
    kept = outermost([path for path, _ in guards if os.path.lexists(path)])
    for path in sorted(kept, key=lambda path: path.parts):
        argv += ["--ro-bind", str(path), str(path)]
    for path in sorted(outermost(inside), key=lambda path: path.parts):
        argv += ["--ro-bind", str(path), str(path)]
    for path in outermost(existing([*rules.hidden, kernel_dir])):
        argv += hide(path, own, empty, tmpfs)
    for path in own_writable:
        argv += ["--bind", str(path), str(path)]
    for path in own_readable:
        argv += ["--ro-bind", str(path), str(path)]
    # Read-only last: bwrap made the mount points of the re-exposed paths inside them first.
    for path in tmpfs:
        argv += ["--remount-ro", str(path)]
    argv += ["--setenv", "TMPDIR", str(TMP), "--setenv", "IPYTHONDIR", str(IPYTHON_DIR)]
    if proxied:
        for name, value in proxy_environment(BRIDGE_PORT).items():
            argv += ["--setenv", name, value]
        kernel_cmd = bridged(kernel_cmd, python=sys.executable, kernel_dir=kernel_dir)
    if relay:
        kernel_cmd = relayed(kernel_cmd, python=sys.executable, kernel_dir=kernel_dir, routes=relay)
    for name in dict.fromkeys([*unset_env, *(UNSET if proxied else ())]):
        argv += ["--unsetenv", name]
    argv += ["--chdir", str(cwd), "--", *kernel_cmd]
    return argv


def home_arguments(view: HomeView, environment: list[Path], tmpfs: list[Path]) -> list[str]:
    """Return the bwrap arguments that show the home dir as `view` lists it (adding it to
    `tmpfs`, made read-only last), with the `environment` paths in it the kernel runs on."""
    if view.home == Path("/") or not view.home.is_dir():
        return []
    tmpfs.append(view.home)
    argv = ["--tmpfs", str(view.home)]
    for path in view.listed[1:]:
        argv += ["--dir", str(path)]
    # An entry removed since the view was made is simply not there (--ro-bind-try).
    for path in view.shown:
        argv += ["--ro-bind-try", str(path), str(path)]
    for path, target in view.links:
        argv += ["--symlink", target, str(path)]
    for path in outermost(environment):
        argv += ["--ro-bind", str(path), str(path)]
    return argv


Guard = tuple[Path, Kind | None]  # a path kept read-only, and its placeholder


def guarded(top: Path, names: Sequence[str], writable: Sequence[Path]) -> list[Guard]:
    """Return what stays read-only in the writable dir `top`: the whole of its `.git` (a mount
    point: it cannot be renamed or replaced, and a `top` without one cannot get one) or of the
    gitdir a `.git` file names, each protected name (its first missing part gets the
    placeholder: nothing can be made under it), and what the person's tools run later
    (host_code.py: environments, node_modules, bytecode caches, a cache made where there is
    Python source without one)."""
    git = top / GIT
    found: list[Guard] = []
    if not os.path.lexists(git) or git.is_dir():
        found.append((git, "dir"))
    else:  # a .git file: the gitdir it names is guarded where a sandbox could write it
        found.append((git, None))
        gitdir = gitdir_of(git)
        if gitdir is not None and any(within(gitdir, w) for w in writable):
            found.append((gitdir, None))
    for name in names:
        if name == GIT:
            continue
        path = top
        for part in name.split("/"):
            path = path / part
            if not os.path.lexists(path):
                break
        found.append((path, "dir"))
    code = host_code(top)
    if code.cut:
        log.warning(
            "Only the first %d dirs of %s were looked at for environments and bytecode caches "
            "(docs/sandbox.md)",
            MAX_DIRS,
            top,
        )
    # A bytecode cache found may be another kernel's placeholder, gone by the time this one's
    # sandbox starts: then this one makes it again.
    found += [(path, "dir" if path.name == PYCACHE else None) for path in code.kept]
    found += [(path, "dir") for path in code.made]
    return found


def gitdir_of(git_file: Path) -> Path | None:
    """Return the real gitdir a `.git` file names (`gitdir: PATH`, relative to its dir), None
    when it names none that exists."""
    try:
        text = git_file.read_text(errors="replace")
    except OSError:
        return None
    key, _, value = text.strip().partition(":")
    if key.strip() != "gitdir" or not value.strip():
        return None
    gitdir = real(git_file.parent / value.strip())
    return gitdir if gitdir.is_dir() else None


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


def command_status(returncode: int | None) -> int | None:
    """Return the exit status of bwrap's command as Popen would give it, from bwrap's own:
    bwrap passes on its command's death by signal N as the exit code 128 + N."""
    if returncode is not None and 128 < returncode < 128 + 65:
        return 128 - returncode
    return returncode


def kill(init_pid: int) -> None:
    """End the whole sandbox: SIGKILL to its init ends its pid namespace (killing bwrap alone
    would leave the sandbox running)."""
    os.kill(init_pid, signal.SIGKILL)


def children(pid: int) -> list[int]:
    """Return the pids of process `pid`'s children (none when it has ended)."""
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in listed.split()]
