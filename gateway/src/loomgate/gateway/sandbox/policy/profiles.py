"""Sandbox profiles: what a kernel may read, write, reach and use, as written and as made
concrete for one kernel."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

from loomgate.gateway.sandbox.network.network_rules import (
    HOST_NETWORK,
    NO_NETWORK,
    PUBLIC,
    NetworkPolicy,
)
from loomgate.gateway.sandbox.network.network_rules import (
    at_least_as_strict as network_within,
)
from loomgate.gateway.sandbox.policy.always_hidden import ALWAYS_HIDDEN
from loomgate.gateway.sandbox.policy.protected_names import (
    DEFAULT_PROTECTED,
    GIT,
    protected_name,
    protected_name_problem,
    symlinked_protections,
    unprotectable,
)
from loomgate.shared.sizes import GiB, MiB
from loomgate.shared.wire import SandboxRule as Rule

__all__ = [
    "ALWAYS_HIDDEN",
    "BUILT_IN",
    "DEFAULT_MEMORY",
    "DEFAULT_PROCESSES",
    "DEFAULT_PROTECTED",
    "GIT",
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
    "protected_name",
    "protected_name_problem",
    "session_runtime_dirs",
    "symlinked_protections",
    "unprotectable",
]


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
    network: NetworkPolicy
    memory: int | None  # bytes; None: no limit
    processes: int | None  # None: no limit
    protected: tuple[str, ...] = ()  # names protected on top of DEFAULT_PROTECTED
    unprotected: tuple[str, ...] = ()  # names of DEFAULT_PROTECTED the person took out
    readable: tuple[str, ...] = ()  # paths in the home dir shown on top of home_view.READABLE

    def protected_names(self) -> tuple[str, ...]:
        """Return the names protected in each writable dir: the defaults but those taken out,
        then the profile's own (a name both taken out and added stays protected)."""
        out = {protected_name(n) for n in self.unprotected}
        names = [n for n in DEFAULT_PROTECTED if n not in out]
        return tuple(dict.fromkeys([*names, *(protected_name(n) for n in self.protected)]))

    def rules(
        self,
        *,
        cwd: Path,
        home: Path,
        private: tuple[Path, ...] = (),
        session_runtime: tuple[Path, ...] | None = None,
        environment: tuple[Path, ...] = (),
    ) -> SandboxRules:
        """Return this profile made concrete for a kernel working in `cwd`.

        `private`: the gateway's own dirs (its state and config dirs, the Jupyter runtime dirs),
        hidden like ALWAYS_HIDDEN. `session_runtime`: the session's runtime dirs, hidden too
        (None: session_runtime_dirs() of this process). `environment`: the Python environments
        and source trees loomgate runs from (installation.py), read-only even inside a writable
        path; a writable path inside one is left out. Raises SandboxRulesError when the
        profile cannot hold for this kernel (see check_rules()).
        """
        if not self.confined:
            return SandboxRules(self.name, False, (), (), HOST_NETWORK, None, None)
        runtime = session_runtime_dirs() if session_runtime is None else session_runtime
        for what, path in (("working directory", cwd), ("home", home)):
            if not path.is_absolute():
                raise SandboxRulesError(f"The kernel's {what} {path} is not an absolute path.")
        for path in (*private, *runtime):
            if not path.is_absolute():
                raise SandboxRulesError(f"The private path {path} is not an absolute path.")
        for path in environment:
            if not path.is_absolute():
                raise SandboxRulesError(f"The environment path {path} is not an absolute path.")
        where = resolved(cwd)
        installed = outermost(resolved(p) for p in environment)
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
        # Inside the environment loomgate runs from (a kernel started in loomgate's clone), a
        # kernel writes only its temp dir: what it wrote there would run at the next start.
        writable = tuple(w for w in writable if not any(lies_inside(w, e) for e in installed))
        check_rules(self.name, cwd=where, home=resolved(home), writable=writable, hidden=hidden)
        names = self.protected_names()
        linked = symlinked_protections(writable, names)
        if linked:
            raise SandboxRulesError(unprotectable(self.name, *linked[0]))
        read_only = tuple(e for e in installed if any(lies_inside(e, w) for w in writable))
        readable = tuple(concrete_path(p, cwd=where, home=home) for p in self.readable)
        return SandboxRules(
            self.name,
            True,
            writable,
            hidden,
            self.network,
            self.memory,
            self.processes,
            protected=names,
            read_only=read_only,
            readable=readable,
        )


@dataclass(frozen=True)
class SandboxRules:
    """A profile made concrete for one kernel: absolute paths, always-hidden ones included."""

    profile: str
    confined: bool
    writable: tuple[Path, ...]  # the kernel's own temp dir is not listed: it always has one
    hidden: tuple[Path, ...]  # ALWAYS_HIDDEN, the profile's own and the private dirs
    network: NetworkPolicy
    memory: int | None
    processes: int | None
    # Names read-only in each writable dir, also before they exist (besides GIT, always guarded).
    protected: tuple[str, ...] = DEFAULT_PROTECTED
    # The environments and source trees loomgate runs from that lie in a writable path.
    read_only: tuple[Path, ...] = ()
    # Paths in the home dir shown on top of what a kernel sees of it by default (home_view.py).
    readable: tuple[Path, ...] = ()


NONE = SandboxProfile("none", False, (), (), HOST_NETWORK, None, None)
WORKSPACE = SandboxProfile(
    "workspace", True, ("{cwd}",), (), PUBLIC, DEFAULT_MEMORY, DEFAULT_PROCESSES
)
STRICT = replace(WORKSPACE, name="strict", network=NO_NETWORK)
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
    inside a hidden path of `a`, `a` protects every name `b` protects, every read-only path of
    `b` that `a` may write in is read-only in `a` too, every path `a` makes readable in the home
    dir lies inside one `b` makes readable, `a`'s network reaches no more than `b`'s
    (`network_rules.at_least_as_strict`),
    and `a`'s memory and processes limits are no higher than `b`'s (no limit is the loosest).
    """
    if not b.confined:
        return True
    if not a.confined:
        return False
    return (
        all(any(lies_inside(w, v) for v in b.writable) for w in a.writable)
        and all(any(lies_inside(h, g) for g in a.hidden) for h in b.hidden)
        and set(b.protected) <= set(a.protected)
        and all(
            any(lies_inside(r, s) for s in a.read_only)
            or not any(lies_inside(r, w) for w in a.writable)
            for r in b.read_only
        )
        and all(any(lies_inside(r, s) for s in b.readable) for r in a.readable)
        and network_within(a.network, b.network)
        and limit_within(a.memory, b.memory)
        and limit_within(a.processes, b.processes)
    )


def limit_within(a: int | None, b: int | None) -> bool:
    """Return whether limit `a` is no looser than limit `b` (None: no limit)."""
    return b is None or (a is not None and a <= b)
