"""What a confined kernel sees of the home directory: decided entry by entry when it starts, so
that a secret created, or a file replaced, there later is never in it.

The home dir and its config, data and state dirs are shown as lists made at the start: in the
home dir each name not starting with a dot (the person's own files and projects) and each dot
name of READABLE; in the config, data and state dirs the names of XDG_READABLE; in the cache dir
each name; and, in every dir on the way to a hidden path, each name but the hidden ones. A profile
adds paths with `readable`. What is not listed is not there, whatever appears later.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from loomgate.gateway.sandbox.policy.profiles import lies_inside

__all__ = ["READABLE", "XDG_READABLE", "HomeView", "home_view", "kernel_home_view", "xdg_dirs"]

# The dot names a kernel commonly needs in the home dir: configuration of the tools it runs (git,
# matplotlib, Jupyter, IPython, conda, pip), the user site-packages and scripts, interpreters and
# toolchains installed there. Never a file that holds a credential by design (a shell's rc file
# may export tokens: not listed).
READABLE: tuple[str, ...] = (
    ".local",
    ".local/bin",
    ".local/lib",
    ".local/share",
    ".local/state",
    ".cache",
    ".config",
    ".gitconfig",
    ".gitignore",
    ".gitignore_global",
    ".ipython",
    ".jupyter",
    ".matplotlib",
    ".keras",
    ".conda",
    ".condarc",
    ".pip",
    ".pyenv",
    ".rustup",
    ".cargo",
    ".julia",
    ".R",
    ".Rprofile",
    ".nvm",
    ".deno",
    ".bun",
    ".npm",
    ".m2",
    ".gradle",
    ".ivy2",
    ".sbt",
    ".gem",
    ".fonts",
    ".terminfo",
)
# The entries of each config and data dir a kernel commonly needs (a state dir: none).
XDG_READABLE: dict[str, tuple[str, ...]] = {
    "config": ("matplotlib", "pip", "uv", "git", "fontconfig", "jupyter", "ipython", "dask"),
    "data": ("jupyter", "fonts", "uv", "pipx", "virtualenv"),
    "state": (),
}


def xdg_dirs(home: Path, env: Mapping[str, str]) -> dict[str, tuple[Path, ...]]:
    """Return the config, data, state and cache dirs, by kind: each one's default in `home`,
    and the one its XDG variable names (where that is set: programs may use either)."""
    defaults = {
        "config": ("XDG_CONFIG_HOME", ".config"),
        "data": ("XDG_DATA_HOME", ".local/share"),
        "state": ("XDG_STATE_HOME", ".local/state"),
        "cache": ("XDG_CACHE_HOME", ".cache"),
    }
    found: dict[str, tuple[Path, ...]] = {}
    for kind, (variable, default) in defaults.items():
        value = Path(env.get(variable, ""))
        named = (value,) if value.is_absolute() else ()
        found[kind] = tuple(dict.fromkeys((home / default, *named)))
    return found


@dataclass(frozen=True)
class HomeView:
    """The home dir as a kernel sees it: dirs made empty and then listed, entries bound
    read-only, symlinks made again (their targets are seen as anything else is)."""

    home: Path
    listed: tuple[Path, ...]  # parents before what lies in them
    shown: tuple[Path, ...]
    links: tuple[tuple[Path, str], ...]
    # The entries of the listed dirs no list holds (a mechanism that only allows walks around
    # them, as around hidden paths).
    left_out: tuple[Path, ...] = ()


def home_view(
    home: Path,
    hidden: Iterable[Path],
    readable: Iterable[Path],
    xdg: Mapping[str, tuple[Path, ...]],
) -> HomeView:
    """Return what a kernel sees of `home` (real paths), given its `hidden` paths, the paths its
    profile makes `readable` (on top of READABLE) and the `xdg` dirs (xdg_dirs())."""
    hidden = [path for path in hidden if lies_inside(path, home) and path != home]
    readable = [path for path in readable if lies_inside(path, home) and path != home]
    kept = {d for kind in ("config", "data", "state") for d in xdg[kind] if lies_inside(d, home)}
    cache = [d for d in xdg["cache"] if lies_inside(d, home)]
    # Shown as lists: the home, its XDG dirs, and each dir on the way to one of those, to a
    # hidden path or to a readable one (which alone is shown there).
    listed = {home, *kept, *cache}
    for end in (*kept, *cache, *hidden, *readable):
        listed.update(parent for parent in end.parents if lies_inside(parent, home))
    named = {home / name for name in READABLE} | set(readable)
    named |= {d / name for kind, names in XDG_READABLE.items() for d in xdg[kind] for name in names}
    named |= {parent for path in readable for parent in path.parents if parent in listed}
    shown: list[Path] = []
    links: list[tuple[Path, str]] = []
    made: list[Path] = []
    left_out: list[Path] = []
    queue = [home]
    while queue:
        top = queue.pop(0)
        made.append(top)
        try:
            entries = sorted(os.scandir(top), key=lambda entry: entry.name)
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if any(lies_inside(path, h) for h in hidden):
                continue  # covered where it exists (hidden), not found where it appears later
            if not allowed(path, top, home, kept, named):
                left_out.append(path)
                continue
            if entry.is_symlink():
                links.append((path, str(path.readlink())))
            elif path in listed and entry.is_dir(follow_symlinks=False):
                queue.append(path)
            else:
                shown.append(path)
    return HomeView(
        home=home,
        listed=tuple(made),
        shown=tuple(shown),
        links=tuple(links),
        left_out=tuple(left_out),
    )


def kernel_home_view(hidden: Iterable[Path], readable: Iterable[Path]) -> HomeView:
    """Return what a kernel of this gateway sees of its home dir (real paths throughout), given
    the kernel's `hidden` and `readable` paths."""
    home = real(Path.home())
    shown = [real(path) for path in readable]
    return home_view(home, [real(path) for path in hidden], shown, xdg_dirs(home, os.environ))


def real(path: Path) -> Path:
    """Return `path` with every link on the way resolved."""
    return Path(os.path.realpath(path))


def allowed(path: Path, top: Path, home: Path, kept: set[Path], named: set[Path]) -> bool:
    """Return whether the entry `path` of the listed dir `top` is shown: a named one anywhere;
    in the home dir a name without a leading dot; in a config, data or state dir only a named
    one; elsewhere (the cache dir, a dir on the way to a hidden path) each."""
    if path in named:
        return True
    if top == home:
        return not path.name.startswith(".")
    return top not in kept
