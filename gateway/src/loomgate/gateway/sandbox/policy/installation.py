"""The Python environments and source trees a kernel runs on and loomgate runs from: read-only in
every sandbox, even inside a writable dir (a `.pth` file or a module written there would run at
the next start of that Python, outside any sandbox), and visible when they lie under the host's
/tmp (the sandbox has a /tmp of its own)."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import os
import shutil
import stat
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from loomgate.gateway.sandbox.policy.profiles import outermost, resolved

__all__ = ["editable_root", "installation_roots", "interpreter_roots", "venv_config", "venv_home"]

# loomgate's distributions (the root wheel carries all three packages; the members install alone)
DISTRIBUTIONS = ("loomgate", "loomgate-gateway", "loomgate-shared", "loomgate-translator")
PACKAGES = ("loomgate.gateway", "loomgate.shared", "loomgate.translator")
LIBRARY_PATHS = ("stdlib", "platstdlib", "purelib", "platlib")
VENV_CONFIG_LIMIT = 65536  # bytes of a pyvenv.cfg read: a few lines


@functools.cache
def installation_roots() -> tuple[Path, ...]:
    """Return where loomgate runs from in this process: its venv (else its interpreter's library
    dirs), its base interpreter's library dirs, each editable distribution's source tree and
    each of its packages' dirs (an install by PYTHONPATH or a .pth of one's own)."""
    roots: list[Path] = []
    if sys.prefix != sys.base_prefix:  # a venv: all of it is the environment
        roots.append(Path(sys.prefix))
    paths = sysconfig.get_paths()
    roots += [Path(paths[name]) for name in LIBRARY_PATHS if name in paths]
    for name in DISTRIBUTIONS:
        root = editable_root(name)
        if root is not None:
            roots.append(root)
    roots += package_dirs(PACKAGES)
    return outermost(resolved(root) for root in roots if root.is_absolute())


def editable_root(distribution: str) -> Path | None:
    """Return the source tree of `distribution` when it is installed editable (its
    direct_url.json: `{"url": "file:///…", "dir_info": {"editable": true}}`), else None."""
    try:
        text = importlib.metadata.distribution(distribution).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    return editable_url_root(text)


def editable_url_root(text: str | None) -> Path | None:
    """Return the local dir a direct_url.json `text` names for an editable install, else None."""
    try:
        data = json.loads(text or "")
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        return None
    info = data.get("dir_info")
    if not isinstance(info, dict) or info.get("editable") is not True:
        return None
    url = urlparse(data["url"])
    if url.scheme != "file" or url.netloc not in ("", "localhost"):
        return None
    path = Path(unquote(url.path))
    return path if path.is_absolute() else None


def package_dirs(names: Iterable[str]) -> list[Path]:
    """Return the dirs the packages `names` are imported from here (those that import)."""
    found: list[Path] = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(Path(location))
    return found


def interpreter_roots(
    kernel_cmd: Sequence[str], *, cwd: Path, search_path: str | None = None
) -> tuple[Path, ...]:
    """Return the prefixes of the program `kernel_cmd` starts (its interpreter): the venv it
    lies in (the dir holding pyvenv.cfg), that venv's base (pyvenv.cfg's `home` is its bin dir),
    and the prefix its real executable lies in (`/usr` for /usr/bin/python3). `search_path`:
    where a bare name is looked up (None: this process's PATH)."""
    if not kernel_cmd:
        return ()
    program = kernel_cmd[0]
    if "/" in program:
        found: str | None = str(cwd / program)
    else:
        found = shutil.which(program, path=search_path)
    if found is None:
        return ()
    executable = Path(os.path.normpath(Path(found).absolute()))
    roots: list[Path] = []
    venv = executable.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        roots.append(venv)
        home = venv_home(venv / "pyvenv.cfg")
        if home is not None:
            roots.append(home.parent)  # the base's prefix: its stdlib and libpython
    roots.append(Path(os.path.realpath(executable)).parent.parent)
    return outermost(resolved(root) for root in roots if root != Path("/"))


def venv_config(path: Path) -> dict[str, str]:
    """Return the `key = value` lines of a venv's pyvenv.cfg, keys lower-cased ({} when it is
    no readable regular file: a FIFO a kernel put where its interpreter's venv would be must
    not block the gateway, nor a symlink lead it elsewhere)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return {}
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return {}
        lines = file.read(VENV_CONFIG_LIMIT).decode(errors="replace").splitlines()
    pairs = (line.partition("=") for line in lines)
    return {key.strip().lower(): value.strip() for key, sep, value in pairs if sep}


def venv_home(config: Path) -> Path | None:
    """Return the `home` (the base interpreter's bin dir) a venv's pyvenv.cfg names, None when
    it names no absolute one or cannot be read (`venv_config`)."""
    home = venv_config(config).get("home", "")
    return Path(home) if home.startswith("/") else None
