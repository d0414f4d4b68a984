"""kernel_homes: which per-user dirs a confined kernel gets a home of its own for, and the
dirs themselves (kept across starts)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement.kernel_homes import (
    HOMES,
    homes_dir,
    homes_environment,
    prepare_homes,
)
from loomgate.gateway.sandbox.network.network_rules import PUBLIC
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

K = Path("/k")
CACHE = "/k/homes/cache"
MPL = "/k/homes/matplotlib"
HOME = {"HOME": "/home/p"}
PERSONS_RC = "/home/p/.config/matplotlib" if sys.platform.startswith("linux") else None


def rules(*writable: str, hidden: tuple[str, ...] = ("/home/p/.ssh",)) -> SandboxRules:
    """Return workspace-like rules writing in /srv/proj and `writable`."""
    paths = tuple(Path(p) for p in ("/srv/proj", *writable))
    return SandboxRules(
        "workspace", True, paths, tuple(Path(h) for h in hidden), PUBLIC, None, None
    )


NONE = SandboxRules("none", False, (), (), PUBLIC, None, None)
UNSET = None

CASES = [
    # case, rules, env, XDG_CACHE_HOME, MPLCONFIGDIR, MATPLOTLIBRC
    ("the person's home is read-only", rules(), HOME, CACHE, MPL, PERSONS_RC),
    (
        "a cache home the profile makes writable stays",
        rules("/home/p/.cache"),
        HOME,
        UNSET,
        MPL,
        PERSONS_RC,
    ),
    (
        "XDG_CACHE_HOME inside the project stays",
        rules(),
        {**HOME, "XDG_CACHE_HOME": "/srv/proj/.cache"},
        "/srv/proj/.cache",
        MPL,
        PERSONS_RC,
    ),
    (
        "a read-only XDG_CACHE_HOME is replaced",
        rules(),
        {**HOME, "XDG_CACHE_HOME": "/var/cache/p"},
        CACHE,
        MPL,
        PERSONS_RC,
    ),
    (
        "a relative XDG_CACHE_HOME means ~/.cache (the XDG spec)",
        rules("/home/p/.cache"),
        {**HOME, "XDG_CACHE_HOME": "cache"},
        "cache",
        MPL,
        PERSONS_RC,
    ),
    (
        "a writable cache inside a hidden path is replaced",
        rules("/home/p/.cache", hidden=("/home/p/.cache",)),
        HOME,
        CACHE,
        MPL,
        PERSONS_RC,
    ),
    (
        "a writable MPLCONFIGDIR stays, and its matplotlibrc is read",
        rules(),
        {**HOME, "MPLCONFIGDIR": "/srv/proj/.mpl"},
        CACHE,
        "/srv/proj/.mpl",
        UNSET,
    ),
    (
        "a read-only MPLCONFIGDIR is replaced",
        rules(),
        {**HOME, "MPLCONFIGDIR": "/home/p/.mpl"},
        CACHE,
        MPL,
        PERSONS_RC,
    ),
    (
        "the person's MATPLOTLIBRC stays",
        rules(),
        {**HOME, "MATPLOTLIBRC": "/etc/mplrc"},
        CACHE,
        MPL,
        "/etc/mplrc",
    ),
    (
        "matplotlibrc is read from XDG_CONFIG_HOME",
        rules(),
        {**HOME, "XDG_CONFIG_HOME": "/cfg"},
        CACHE,
        MPL,
        "/cfg/matplotlib" if PERSONS_RC else None,
    ),
    ("an unconfined kernel keeps everything", NONE, HOME, UNSET, UNSET, UNSET),
]


@pytest.mark.parametrize(
    ("case", "kernel_rules", "env", "cache", "mpl", "rc"), CASES, ids=[c[0] for c in CASES]
)
def test_which_homes_a_kernel_gets(
    case: str,
    kernel_rules: SandboxRules,
    env: dict[str, str],
    cache: str | None,
    mpl: str | None,
    rc: str | None,
) -> None:
    made = homes_environment(env, kernel_rules, K)
    assert made.get("XDG_CACHE_HOME") == cache
    assert made.get("MPLCONFIGDIR") == mpl
    if PERSONS_RC is not None or rc is None:
        assert made.get("MATPLOTLIBRC") == rc
    # The config home stays the person's: the kernel's programs read the person's config.
    assert made.get("XDG_CONFIG_HOME") == env.get("XDG_CONFIG_HOME")
    assert made["HOME"] == env["HOME"]


def test_the_homes_are_made_private_and_kept(tmp_path: Path) -> None:
    prepare_homes(tmp_path)
    top = homes_dir(tmp_path)
    for path in (top, *(top / name for name in HOMES)):
        assert path.is_dir() and stat.S_IMODE(path.stat().st_mode) == 0o700, path
    kept = top / "cache" / "fontconfig" / "cache-1"
    kept.parent.mkdir()
    kept.write_text("x")
    prepare_homes(tmp_path)  # the next start
    assert kept.read_text() == "x"
