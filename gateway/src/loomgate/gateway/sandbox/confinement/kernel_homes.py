"""A confined kernel's own cache and matplotlib homes: writable dirs in the kernel's own dir
(kept across its restarts, removed with it), for what programs write to the person's cache and
to matplotlib's config dir, which the sandbox keeps read-only.

Only dirs a program writes for itself get one: the cache home (XDG_CACHE_HOME: fontconfig,
Hugging Face, torch, uv, numba) and matplotlib's config and cache dir (MPLCONFIGDIR), without
which every new kernel warns and builds matplotlib's font cache in a temp dir on its first
import. The config home (XDG_CONFIG_HOME) stays the person's, read-only: the kernel's programs
read the person's configuration (pip.conf, git's, matplotlibrc through MATPLOTLIBRC), and
nothing a kernel writes lands where the person's own programs read it later. A home the rules
already make writable (the person's own choice) is left as it is.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from loomgate.gateway.sandbox.policy.profiles import SandboxRules, lies_inside, resolved

__all__ = ["HOMES", "homes_dir", "homes_environment", "prepare_homes", "writable"]

CACHE = "cache"  # XDG_CACHE_HOME
MATPLOTLIB = "matplotlib"  # MPLCONFIGDIR: matplotlib's config and cache
HOMES = (CACHE, MATPLOTLIB)


def homes_dir(kernel_dir: Path) -> Path:
    """Return the dir holding the kernel's own homes, in its own dir."""
    return kernel_dir / "homes"


def prepare_homes(kernel_dir: Path) -> None:
    """Create the kernel's homes (mode 0700), keeping what an earlier start left there."""
    top = homes_dir(kernel_dir)
    top.mkdir(mode=0o700, exist_ok=True)
    for name in HOMES:
        (top / name).mkdir(mode=0o700, exist_ok=True)


def homes_environment(
    env: Mapping[str, str], rules: SandboxRules, kernel_dir: Path
) -> dict[str, str]:
    """Return `env` with the cache home and matplotlib's dir of a kernel confined by `rules`
    that the rules keep read-only moved to the kernel's own homes; the person's matplotlibrc
    is still read (MATPLOTLIBRC)."""
    out = dict(env)
    if not rules.confined:
        return out
    top = homes_dir(kernel_dir)
    home = Path(env.get("HOME") or Path.home())
    if not writable(rules, cache_home(env, home)):
        out["XDG_CACHE_HOME"] = str(top / CACHE)
    chosen = env.get("MPLCONFIGDIR")
    if not (chosen and writable(rules, Path(chosen))):
        out["MPLCONFIGDIR"] = str(top / MATPLOTLIB)
        out.setdefault("MATPLOTLIBRC", str(matplotlib_config_dir(env, home)))
    return out


def cache_home(env: Mapping[str, str], home: Path) -> Path:
    """Return the person's cache home in `env` (XDG_CACHE_HOME, else ~/.cache)."""
    return xdg_dir(env, "XDG_CACHE_HOME") or home / ".cache"


def matplotlib_config_dir(env: Mapping[str, str], home: Path) -> Path:
    """Return where matplotlib reads the person's matplotlibrc from without MPLCONFIGDIR."""
    if sys.platform.startswith(("linux", "freebsd")):
        return (xdg_dir(env, "XDG_CONFIG_HOME") or home / ".config") / "matplotlib"
    return home / ".matplotlib"


def xdg_dir(env: Mapping[str, str], name: str) -> Path | None:
    """Return the dir variable `name` names in `env` (None: unset, or not absolute, which the
    XDG spec says to ignore)."""
    path = Path(env.get(name) or ".")
    return path if path.is_absolute() else None


def writable(rules: SandboxRules, path: Path) -> bool:
    """Return whether a kernel under `rules` may write `path` (inside a writable path and
    inside no hidden one)."""
    real = resolved(path)
    return any(lies_inside(real, w) for w in rules.writable) and not any(
        lies_inside(real, h) for h in rules.hidden
    )
