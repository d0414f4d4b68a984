"""Sandbox profiles: what a kernel may read, write, reach and use, as written and as made
concrete for one kernel."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from loomgate.shared.sizes import GiB, MiB
from loomgate.shared.wire import SandboxRule as Rule

__all__ = [
    "ALWAYS_HIDDEN",
    "BUILT_IN",
    "DEFAULT_MEMORY",
    "DEFAULT_PROCESSES",
    "NONE",
    "STRICT",
    "WORKSPACE",
    "Rule",
    "SandboxProfile",
    "SandboxRules",
    "SandboxRulesError",
    "at_least_as_strict",
    "concrete_path",
    "lies_inside",
    "session_runtime_dirs",
]


# Never readable under any profile but `none`; a profile cannot take one out. Home-relative
# ones start with `~/`. A path that does not exist here is kept: it may appear later, and on
# the other OS (the macOS ones on Linux) it costs nothing.
ALWAYS_HIDDEN: tuple[str, ...] = (
    # keys and cloud, cluster, registry and forge credentials
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/git/credentials",
    "~/.config/gh",
    "~/.pypirc",
    # the agents' own logins (a kernel could act as the person's assistant)
    "~/.claude/.credentials.json",
    "~/.codex/auth.json",
    # password stores and keyrings
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.gnome2/keyrings",
    "~/.local/share/kwalletd",
    "~/Library/Keychains",
    # the display's cookies (a client of the person's display can type into their windows)
    "~/.Xauthority",
    "~/.ICEauthority",
    # browser profiles (cookies, saved passwords, sessions)
    "~/.mozilla",
    "~/.config/google-chrome",
    "~/.config/chromium",
    "~/.config/BraveSoftware",
    "~/.config/microsoft-edge",
    "~/snap/firefox",
    "~/snap/chromium",
    "~/Library/Application Support/Google/Chrome",
    "~/Library/Application Support/Chromium",
    "~/Library/Application Support/BraveSoftware",
    "~/Library/Application Support/Microsoft Edge",
    "~/Library/Application Support/Firefox",
    "~/Library/Safari",
    "~/Library/Cookies",
    # system sockets through which something outside would run code for the kernel: the system
    # bus, docker, containerd, podman and systemd's own socket (the session's runtime dir, with
    # its D-Bus and systemd user sockets, is added by session_runtime_dirs())
    "/run/dbus",
    "/var/run/dbus",
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd",
    "/run/podman",
    "/run/systemd/private",
)


def physical_memory(sysconf: Callable[[str], int] = os.sysconf) -> int | None:
    """Return this machine's physical memory in bytes (as `sysconf` tells), None where the OS
    does not say."""
    try:
        pages = sysconf("SC_PHYS_PAGES")
        page_size = sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    return pages * page_size if pages > 0 and page_size > 0 else None


def default_memory(physical: int | None) -> int:
    """Return the default memory limit: half of `physical` (whole MiB), 4 GiB if unknown.

    Half leaves the person's other work the other half when a cell allocates without bound,
    and a kernel whose data fits in memory at all fits in it.
    """
    if physical is None:
        return 4 * GiB
    return max(physical // 2 // MiB, 1) * MiB


def default_processes(cpus: int | None) -> int:
    """Return the default processes limit: 512, or 64 per CPU where that is more.

    The limit counts the kernel's processes and threads together. A fork loop is held at a few
    hundred, far below what takes a machine down, while a pool with one worker per CPU, each
    with a thread per CPU (BLAS), still fits on a large machine.
    """
    return max(512, 64 * (cpus or 1))


# Computed once, at import: the machine does not change under a running gateway.
# On macOS no per-kernel limit can be set (sandbox-exec has none): the built-ins set none there.
LIMITED = sys.platform != "darwin"
DEFAULT_MEMORY: int | None = default_memory(physical_memory()) if LIMITED else None
DEFAULT_PROCESSES: int | None = default_processes(os.cpu_count()) if LIMITED else None


class SandboxRulesError(ValueError):
    """A profile that cannot be made concrete for a kernel: the sentence says why and what to do."""


@dataclass(frozen=True)
class SandboxProfile:
    """A profile as the person writes it: paths may hold `~` and `{cwd}`."""

    name: str
    confined: bool  # False only for `none`
    writable: tuple[str, ...]
    hidden: tuple[str, ...]  # the profile's own, on top of ALWAYS_HIDDEN
    network: bool
    memory: int | None  # bytes; None: no limit
    processes: int | None  # None: no limit

    def rules(
        self,
        *,
        cwd: Path,
        home: Path,
        private: tuple[Path, ...] = (),
        session_runtime: tuple[Path, ...] | None = None,
    ) -> SandboxRules:
        """Return this profile made concrete for a kernel working in `cwd`.

        `private`: the gateway's own dirs (its state and config dirs, the Jupyter runtime dirs),
        hidden like ALWAYS_HIDDEN. `session_runtime`: the session's runtime dirs, hidden too
        (None: session_runtime_dirs() of this process). Raises SandboxRulesError when the
        profile cannot hold for this kernel (see check_rules()).
        """
        if not self.confined:
            return SandboxRules(self.name, False, (), (), True, None, None)
        runtime = session_runtime_dirs() if session_runtime is None else session_runtime
        for what, path in (("working directory", cwd), ("home", home)):
            if not path.is_absolute():
                raise SandboxRulesError(f"The kernel's {what} {path} is not an absolute path.")
        for path in (*private, *runtime):
            if not path.is_absolute():
                raise SandboxRulesError(f"The private path {path} is not an absolute path.")
        where = resolved(cwd)
        hidden = outermost(
            [concrete_path(p, cwd=where, home=home) for p in (*ALWAYS_HIDDEN, *self.hidden)]
            + [resolved(p) for p in (*private, *runtime)]
        )
        writable = outermost(
            [
                concrete_path(p, cwd=where, home=home)
                for p in self.writable
                # Started in the home dir or `/` (as MCP hosts may start servers), a kernel
                # writes only its temp dir, rather than failing to start (see check_rules()).
                if not (p == CWD and lies_inside(resolved(home), where))
            ]
        )
        check_rules(self.name, cwd=where, home=resolved(home), writable=writable, hidden=hidden)
        return SandboxRules(
            self.name, True, writable, hidden, self.network, self.memory, self.processes
        )


@dataclass(frozen=True)
class SandboxRules:
    """A profile made concrete for one kernel: absolute paths, always-hidden ones included."""

    profile: str
    confined: bool
    writable: tuple[Path, ...]  # the kernel's own temp dir is not listed: it always has one
    hidden: tuple[Path, ...]  # ALWAYS_HIDDEN, the profile's own and the private dirs
    network: bool
    memory: int | None
    processes: int | None


NONE = SandboxProfile("none", False, (), (), True, None, None)
WORKSPACE = SandboxProfile(
    "workspace", True, ("{cwd}",), (), True, DEFAULT_MEMORY, DEFAULT_PROCESSES
)
STRICT = replace(WORKSPACE, name="strict", network=False)
BUILT_IN: Mapping[str, SandboxProfile] = MappingProxyType(
    {profile.name: profile for profile in (NONE, WORKSPACE, STRICT)}
)


def session_runtime_dirs(
    environ: Mapping[str, str] | None = None, uid: int | None = None
) -> tuple[Path, ...]:
    """Return the session's runtime dirs: $XDG_RUNTIME_DIR when set and absolute, and
    /run/user/UID (the session's D-Bus and systemd user sockets live there)."""
    env = os.environ if environ is None else environ
    found: list[Path] = []
    explicit = env.get("XDG_RUNTIME_DIR", "")
    if explicit.startswith("/"):
        found.append(Path(explicit))
    found.append(Path("/run/user") / str(os.getuid() if uid is None else uid))
    return tuple(dict.fromkeys(found))


CWD = "{cwd}"


def written_path_problem(text: str) -> str | None:
    """Return what is wrong with a path as written in a profile, None if it is well formed.

    A path is absolute (`/data`), home-relative (`~`, `~/x`) or relative to the kernel's
    working directory (`{cwd}`, `{cwd}/x`); `{cwd}` only begins a path.
    """
    if not text:
        return "a path is empty"
    if "\x00" in text:
        return f"path {text!r} holds a NUL character"
    starts_cwd = text == CWD or text.startswith(CWD + "/")
    if CWD in (text[len(CWD) :] if starts_cwd else text):
        return f"path {text!r} uses {CWD} inside it: {CWD} may only begin a path"
    if starts_cwd or text == "~" or text.startswith(("~/", "/")):
        return None
    if text.startswith("~"):
        return f"path {text!r} names another user's home: write ~/… (yours) or an absolute path"
    return f"path {text!r} is relative: write it as {CWD}/{text}, ~/{text} or an absolute path"


def concrete_path(text: str, *, cwd: Path, home: Path) -> Path:
    """Return the absolute, normalised path a profile's `text` stands for (SandboxRulesError if
    it is malformed); symlinks are resolved as far as the path exists."""
    problem = written_path_problem(text)
    if problem is not None:
        raise SandboxRulesError(problem[0].upper() + problem[1:])
    if text == CWD or text.startswith(CWD + "/"):
        path = cwd / text[len(CWD) :].lstrip("/")
    elif text == "~" or text.startswith("~/"):
        path = home / text[1:].lstrip("/")
    else:
        path = Path(text)
    return resolved(path)


def resolved(path: Path) -> Path:
    """Return `path` absolute and normalised, its existing part's symlinks resolved."""
    normal = Path(os.path.normpath(path))
    try:
        return normal.resolve(strict=False)
    except (OSError, RuntimeError):  # a symlink loop: keep it as written
        return normal


def lies_inside(path: Path, root: Path) -> bool:
    """Return whether absolute `path` is absolute `root` or below it (by whole components, no
    file system)."""
    # A Path keeps its parts; `root in path.parents` would build a Path for every parent, and
    # each kernel's start asks this for its ~60 hidden paths against one another.
    parts = root.parts
    return path.parts[: len(parts)] == parts


def outermost(paths: Iterable[Path]) -> tuple[Path, ...]:
    """Return `paths` sorted, without duplicates and without those inside another of them."""
    kept: list[Path] = []
    # Sorted by their parts, the paths inside one follow it, before any path outside it.
    for path in sorted(set(paths)):
        if not kept or not lies_inside(path, kept[-1]):
            kept.append(path)
    return tuple(kept)


def check_rules(
    profile: str,
    *,
    cwd: Path,
    home: Path,
    writable: tuple[Path, ...],
    hidden: tuple[Path, ...],
) -> None:
    """Raise SandboxRulesError unless these rules can hold for a kernel in `cwd`.

    - A writable path may not lie inside a hidden one (a kernel cannot write where it cannot
      see); a hidden path inside a writable one is fine: it stays hidden.
    - The working directory may not lie inside a hidden path (the kernel could not start in it).
    - No writable path may be your home directory or hold it (`/`, `/home`): a kernel that may
      write there could change your shell's start-up files and so run code outside its sandbox.
    """
    for path in writable:
        inside = next((h for h in hidden if lies_inside(path, h)), None)
        if inside is not None:
            raise SandboxRulesError(
                f"Profile {profile!r} makes {path} writable, but it lies inside the hidden "
                f"path {inside}: a kernel cannot write where it cannot see; remove it from the "
                "profile's writable list."
            )
        if lies_inside(home, path):
            what = "is your home directory" if path == home else "holds your home directory"
            raise SandboxRulesError(
                f"Profile {profile!r} would make {path} writable, which {what}: a kernel "
                "that may write there could change your shell's start-up files and run code "
                "outside its sandbox. Start the kernel in a project directory, or choose "
                "profile 'none'."
            )
    inside = next((h for h in hidden if lies_inside(cwd, h)), None)
    if inside is not None:
        raise SandboxRulesError(
            f"The kernel's working directory {cwd} lies inside {inside}, which profile "
            f"{profile!r} hides: start the kernel in another directory, or choose profile "
            "'none'."
        )


def at_least_as_strict(a: SandboxRules, b: SandboxRules) -> bool:
    """Return whether `a` allows nothing that `b` forbids (decided by the rules, not names).

    `a` is at least as strict as `b` when: `b` is not confined, or `a` is confined and every
    writable path of `a` lies inside a writable path of `b`, every hidden path of `b` lies
    inside a hidden path of `a`, `a` has no network where `b` has none, and `a`'s memory and
    processes limits are no higher than `b`'s (no limit is the loosest).
    """
    if not b.confined:
        return True
    if not a.confined:
        return False
    return (
        all(any(lies_inside(w, v) for v in b.writable) for w in a.writable)
        and all(any(lies_inside(h, g) for g in a.hidden) for h in b.hidden)
        and (b.network or not a.network)
        and limit_within(a.memory, b.memory)
        and limit_within(a.processes, b.processes)
    )


def limit_within(a: int | None, b: int | None) -> bool:
    """Return whether limit `a` is no looser than limit `b` (None: no limit)."""
    return b is None or (a is not None and a <= b)
