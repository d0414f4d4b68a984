"""The names kept read-only in every writable dir, also before they exist: the defaults, how
a profile's own are written, and the symlinks among them, which no mount can keep."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "DEFAULT_PROTECTED",
    "GIT",
    "protected_name",
    "protected_name_problem",
    "symlinked_protections",
    "unprotectable",
]

# Read-only in every writable dir, also before they exist: files that programs of the person's
# load and act on when started there later (MCP hosts, agents' hooks and instructions, editors,
# direnv, git's submodules and hooks, npm, environments, IPython and Jupyter). Relative to each
# writable dir; a profile adds names (`protected`) and the person may take a default out
# (`unprotected`). Each `jupyter X` app reads
# jupyter_config and jupyter_X_config (X: its name, "-" as "_"); before jupyter_core 4.11.2 and
# IPython 8.0.1 they read them from the directory they were started in too.
JUPYTER_APPS = (
    "",
    "_server",
    "_notebook",
    "_lab",
    "_nbconvert",
    "_console",
    "_qtconsole",
    "_nbclassic",
    "_kernel_gateway",
    "_execute",
)
DEFAULT_PROTECTED: tuple[str, ...] = (
    ".mcp.json",
    ".claude",
    ".codex",
    ".cursor",
    ".vscode",
    ".idea",
    ".envrc",
    ".gitmodules",
    # what git runs at a commit, npm and yarn at each script, a devcontainer on the host
    ".pre-commit-config.yaml",
    ".husky",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".devcontainer",
    # instructions to agents that run unconfined
    "CLAUDE.md",
    "AGENTS.md",
    "GEMINI.md",
    ".gemini",
    ".windsurfrules",
    ".clinerules",
    ".github/copilot-instructions.md",
    # environments the person's tools run from (any dir with a pyvenv.cfg: host_code.py)
    ".venv",
    "venv",
    "node_modules",
    "ipython_config.py",
    "ipython_kernel_config.py",
    ".ipython",
    ".jupyter",
    *(f"jupyter{app}_config.{suffix}" for app in JUPYTER_APPS for suffix in ("py", "json")),
)
# In every writable dir: read-only as a whole (no commits from inside: its hooks, config and
# index are what git runs and reads for the person later), never taken out.
GIT = ".git"


def protected_name_problem(text: str) -> str | None:
    """Return what is wrong with a protected name as written in a profile (None: well formed):
    a path relative to each writable dir (`.envrc`, `.github/workflows`), without `..`."""
    if not text.strip("/"):
        return "a protected name is empty"
    if "\x00" in text:
        return f"protected name {text!r} holds a NUL character"
    if text.startswith(("/", "~", "{")):
        return (
            f"protected name {text!r} is not relative: write it as a name in each writable "
            "directory (e.g. '.envrc' or '.github/workflows')"
        )
    if any(part in (".", "..") for part in text.strip("/").split("/")):
        return f"protected name {text!r} holds '.' or '..': write the name itself"
    return None


def protected_name(text: str) -> str:
    """Return a well-formed protected name as kept: without its empty parts (`.claude/`)."""
    return "/".join(part for part in text.split("/") if part)


def symlinked_protections(writable: Iterable[Path], names: Iterable[str]) -> list[tuple[Path, str]]:
    """Return each protected path (GIT and `names` in each `writable` dir) that is, or passes
    through, a symlink, with its name: a mount cannot keep a symlink from being replaced."""
    found: list[tuple[Path, str]] = []
    for top in writable:
        for name in (GIT, *names):
            path = top
            for part in name.split("/"):
                path = path / part
                if path.is_symlink():
                    found.append((path, name))
                    break
    return found


def unprotectable(profile: str, link: Path, name: str) -> str:
    """Return the sentence refusing a kernel whose protected name `name` is the symlink `link`
    (or passes through it)."""
    remedy = "" if name == GIT else f'take the name out of a profile (unprotected = ["{name}"]), '
    return (
        f"{link} is a symbolic link, which the sandbox of profile {profile!r} cannot keep from "
        "being replaced (what it points to can be made read-only, the link itself cannot): "
        f"replace the link with what it points to, {remedy}or choose profile 'none'."
    )
