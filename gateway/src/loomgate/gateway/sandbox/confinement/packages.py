"""A kernel's own package dir: where `%pip install` and `!pip install` in the kernel put what
they install (never the environment loomgate runs from), and the environment that makes pip
install there, the kernel import from there first, and `pip` on its PATH be its own Python's.

pip installs with `--target` (PIP_TARGET): every package an install names goes into the dir
with all its dependencies, replacing what is there under the same top-level name
(PIP_UPGRADE: without it pip keeps the old files and warns). A kernel whose Python has no pip
(a uv-made environment of another kernel spec) is lent the gateway's own: pip runs on any
Python it supports. Under a profile without network pip looks in no index (PIP_NO_INDEX):
local wheels and the person's find-links install, a name fails at once.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from loomgate.gateway.sandbox.confinement.bubblewrap import ipc_dir, packages_dir
from loomgate.gateway.sandbox.confinement.kernel_homes import writable
from loomgate.gateway.sandbox.confinement.launch import kernel_dirs_location
from loomgate.gateway.sandbox.policy.installation import venv_config
from loomgate.gateway.sandbox.policy.profiles import SandboxRules, resolved

__all__ = [
    "COMMANDS",
    "KernelPackages",
    "PipSource",
    "command_script",
    "kernel_interpreter",
    "pip_cache_dir",
    "pip_environment",
    "pip_source",
    "remove_own_packages",
]

# In the packages dir, loomgate's own part: the `pip` commands and a lent pip. A name Python
# cannot import, and no install brings (pip's --target moves only what it installed).
OWN = ".loomgate"
COMMANDS = ("pip", "pip3")  # what `!pip` finds first on the kernel's PATH
# The names jupyter_client runs as its own interpreter (format_kernel_cmd), whatever PATH says.
OWN_PYTHON_NAMES = frozenset(
    {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
)
VENV_CONFIG = "pyvenv.cfg"
# Where an environment's pip lies below its prefix (Debian's Pythons: dist-packages).
PIP_PLACES = (
    "lib/python3*/site-packages/pip",
    "lib/python3*/dist-packages/pip",
    "lib/python3/dist-packages/pip",
)
VERSION = re.compile(r"(\d+)\.(\d+)")
REQUIRES_AT_LEAST = re.compile(r">=\s*(\d+)\.(\d+)")


class PipSource(Enum):
    """Where the pip a kernel's Python runs comes from."""

    OWN = "own"  # its environment has one
    LENT = "lent"  # the gateway's, on the kernel's sys.path after its packages dir
    MISSING = "missing"  # none, and the gateway's cannot run on it


@dataclass(frozen=True)
class KernelPackages:
    """One kernel's packages dir, the Python that installs into it, and where its pip is."""

    directory: Path
    interpreter: str
    source: PipSource

    @property
    def commands(self) -> Path:
        """Return the dir holding the kernel's `pip` and `pip3` commands."""
        return self.directory / OWN / "bin"

    @property
    def lent(self) -> Path:
        """Return the dir that holds the gateway's pip for a kernel whose Python has none."""
        return self.directory / OWN / "lent"

    def prepare(self) -> None:
        """Create the dir, and loomgate's part in it anew: the kernel's pip commands, and the
        lent pip when it has none. The kernel may have changed that part (it is the kernel's
        to write): nothing there is followed, a symlink included."""
        self.directory.mkdir(mode=0o700, exist_ok=True)  # its parent is the gateway's alone
        own = self.directory / OWN
        remove_entry(own)
        script = command_script(self.interpreter, self.source).encode()
        lent = gateway_pip() if self.source is PipSource.LENT else None
        with new_dir(OWN, self.directory) as own_fd:
            with new_dir("bin", own_fd) as commands:
                for name in COMMANDS:
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                    fd = os.open(name, flags, 0o700, dir_fd=commands)
                    with os.fdopen(fd, "wb") as command:
                        command.write(script)
            if lent is not None:
                with new_dir("lent", own_fd) as lent_fd:
                    os.symlink(lent, "pip", target_is_directory=True, dir_fd=lent_fd)

    def environment(self, env: Mapping[str, str], rules: SandboxRules) -> dict[str, str]:
        """Return `env` made to install into and import from this dir under `rules`. A
        confined kernel's pip uses the person's cache only where the rules make it writable,
        and names it (its cache home may become the kernel's own: kernel_homes.py)."""
        cache = pip_cache_dir(env)
        cache_writable = not rules.confined or writable(rules, cache)
        return pip_environment(
            env,
            self.directory,
            commands=self.commands,
            lent=self.lent if self.source is PipSource.LENT else None,
            no_index=rules.confined and rules.network.off,
            no_cache=not cache_writable,
            cache=cache if rules.confined and cache_writable else None,
        )

    @classmethod
    def for_kernel(
        cls, kernel_dir: Path, argv0: str, env: Mapping[str, str], cwd: Path
    ) -> KernelPackages:
        """Return the packages of the kernel whose own dir is `kernel_dir` and whose kernel
        spec runs `argv0` in `env` from `cwd`, prepared."""
        interpreter = kernel_interpreter(argv0, env, cwd)
        packages = cls(packages_dir(kernel_dir), interpreter, pip_source(interpreter))
        packages.prepare()
        return packages


@contextlib.contextmanager
def new_dir(name: str, parent: Path | int) -> Iterator[int]:
    """Create dir `name` (mode 0700) in `parent` (a path, or an open dir) and yield it open;
    FileExistsError when something is there already."""
    parent_fd, where = (parent, name) if isinstance(parent, int) else (None, str(parent / name))
    os.mkdir(where, 0o700, dir_fd=parent_fd)
    fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def remove_entry(path: Path) -> None:
    """Remove whatever `path` is (a dir with all it holds; a file or symlink, not followed)."""
    try:
        shutil.rmtree(path)  # follows no symlink below it, and refuses one at the top
    except FileNotFoundError:
        return
    except OSError:
        path.unlink(missing_ok=True)


def pip_environment(
    env: Mapping[str, str],
    packages: Path,
    *,
    commands: Path,
    lent: Path | None,
    no_index: bool,
    no_cache: bool,
    cache: Path | None = None,
) -> dict[str, str]:
    """Return `env` with pip installing into `packages`, the kernel importing from it before
    anything else (then from `lent`, a lent pip), and its scripts and the `commands` first on
    PATH; `no_index`: no index at all, `no_cache`: no cache (the person's is not writable),
    `cache`: the cache dir pip is to use (None: the one it finds)."""
    out = dict(env)
    python_path = [str(packages), *([str(lent)] if lent is not None else [])]
    out["PYTHONPATH"] = os.pathsep.join([*python_path, *path_entries(env.get("PYTHONPATH"))])
    search = path_entries(env.get("PATH")) or path_entries(os.defpath)
    out["PATH"] = os.pathsep.join([str(packages / "bin"), str(commands), *search])
    out["PIP_TARGET"] = str(packages)
    out["PIP_UPGRADE"] = "1"  # replace what an earlier install put there, silently
    out["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    out["PIP_ROOT_USER_ACTION"] = "ignore"  # about system site-packages, which it leaves alone
    if no_index:
        out["PIP_NO_INDEX"] = "1"
    if no_cache:
        out["PIP_NO_CACHE_DIR"] = "1"
    elif cache is not None:
        out["PIP_CACHE_DIR"] = str(cache)
    return out


def path_entries(value: str | None) -> list[str]:
    """Return the non-empty entries of a PATH-like variable."""
    return [entry for entry in (value or "").split(os.pathsep) if entry]


def command_script(interpreter: str, source: PipSource) -> str:
    """Return the `pip` command of a kernel: its Python's pip, or one sentence saying there is
    none and what to do."""
    python = shlex.quote(interpreter)
    if source is not PipSource.MISSING:
        return f'#!/bin/sh\nexec {python} -m pip "$@"\n'
    sentence = (
        f"pip: {interpreter} has no pip, and loomgate's cannot run on it; install pip into "
        f"that environment ({interpreter} -m ensurepip), or use a kernel spec whose Python "
        "has pip."
    )
    return f"#!/bin/sh\necho {shlex.quote(sentence)} >&2\nexit 1\n"


def kernel_interpreter(argv0: str, env: Mapping[str, str], cwd: Path) -> str:
    """Return the program a kernel spec's `argv0` starts, as jupyter_client and Popen find it:
    `python` (and this Python's versioned names) is the gateway's own interpreter, another
    name is looked up on the kernel's PATH. Symlinks are kept: a venv's python is one."""
    if argv0 in OWN_PYTHON_NAMES:
        return sys.executable
    if os.sep in argv0:
        return os.path.normpath(cwd / argv0)
    return shutil.which(argv0, path=env.get("PATH", os.defpath)) or argv0


def pip_source(interpreter: str) -> PipSource:
    """Return where `interpreter`'s pip comes from, read from its environment's files: never
    run (a confined kernel may have written another kernel spec's environment, and this runs
    outside every sandbox). A pip missed here is only shadowed by the lent one, which works."""
    if interpreter == sys.executable and gateway_pip() is not None:
        return PipSource.OWN  # pip is the gateway's dependency
    if not Path(interpreter).is_absolute():  # not found: its start fails, saying so
        return PipSource.OWN
    roots, version = environment_roots(Path(interpreter))
    if any(any(root.glob(place)) for root in roots for place in PIP_PLACES):
        return PipSource.OWN
    minimum = gateway_pip_requires()
    runs_there = version is None or minimum is None or version >= minimum
    return PipSource.LENT if gateway_pip() is not None and runs_there else PipSource.MISSING


def environment_roots(interpreter: Path) -> tuple[list[Path], tuple[int, int] | None]:
    """Return the prefixes whose site-packages `interpreter` imports from (its venv, and the
    base Python's when the venv includes them) and its version, when its files say."""
    home = interpreter.parent.parent  # <prefix>/bin/python
    config = home / VENV_CONFIG
    if not config.is_file():  # not a venv: where it is, and where its symlinks lead
        roots = list(dict.fromkeys([home, resolved(interpreter).parent.parent]))
        return roots, next(filter(None, map(version_in_libs, roots)), None)
    values = venv_config(config)
    roots = [home]
    base = values.get("home")
    if values.get("include-system-site-packages", "").lower() == "true" and base:
        roots.append(Path(base).parent)
    found = VERSION.match(values.get("version_info") or values.get("version") or "")
    version = (int(found.group(1)), int(found.group(2))) if found else version_in_libs(home)
    return roots, version


def version_in_libs(prefix: Path) -> tuple[int, int] | None:
    """Return the Python version a prefix's `lib/pythonX.Y` dir names (None: not one)."""
    for lib in sorted(prefix.glob("lib/python3.*")):
        found = VERSION.match(lib.name.removeprefix("python"))
        if found:
            return int(found.group(1)), int(found.group(2))
    return None


@functools.cache
def gateway_pip() -> Path | None:
    """Return the dir of the gateway's own pip package (None: the gateway has none)."""
    spec = importlib.util.find_spec("pip")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def gateway_pip_requires() -> tuple[int, int] | None:
    """Return the oldest Python the gateway's pip runs on (None: it does not say)."""
    try:
        requires = importlib.metadata.metadata("pip").get_all("Requires-Python") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    found = REQUIRES_AT_LEAST.search(" ".join(requires))
    return (int(found.group(1)), int(found.group(2))) if found else None


def pip_cache_dir(env: Mapping[str, str]) -> Path:
    """Return the cache dir pip would use in `env` (PIP_CACHE_DIR, else the platform's)."""
    explicit = env.get("PIP_CACHE_DIR")
    home = Path(env.get("HOME") or Path.home())
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "pip"
    return Path(env.get("XDG_CACHE_HOME") or home / ".cache") / "pip"


def remove_own_packages(ipc_prefix: Path) -> None:
    """Remove the packages dir of the ended kernel whose ipc sockets `ipc_prefix` names, when
    its own dir is one of loomgate's kernel dirs (a confined kernel's sandbox removes the
    whole of its own)."""
    kernel_dir = ipc_prefix.parent.parent
    if ipc_prefix.parent == ipc_dir(kernel_dir) and kernel_dir.parent == kernel_dirs_location():
        shutil.rmtree(packages_dir(kernel_dir), ignore_errors=True)
