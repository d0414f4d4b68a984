"""A kernel's own packages dir, without a kernel: the environment that points pip and the
kernel at it, the `pip` commands, whether a kernel's Python has pip (read from its files), the
dir made anew past what a kernel planted in it, and its removal with the kernel."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import packages
from loomgate.gateway.sandbox.confinement.packages import (
    OWN,
    KernelPackages,
    PipSource,
    command_script,
    gateway_pip,
    kernel_interpreter,
    pip_cache_dir,
    pip_environment,
    pip_source,
    remove_own_packages,
)
from loomgate.gateway.sandbox.network.network_rules import parse_network
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

P = Path("/k/packages")
C = Path("/k/packages/.loomgate/bin")
L = Path("/k/packages/.loomgate/lent")

ENVIRONMENTS = [
    (
        "nothing on the paths yet",
        {"HOME": "/home/p"},
        {"lent": None, "no_index": False, "no_cache": False},
        {
            "PYTHONPATH": "/k/packages",
            "PATH": os.pathsep.join(["/k/packages/bin", str(C), *os.defpath.split(os.pathsep)]),
            "PIP_TARGET": "/k/packages",
            "PIP_UPGRADE": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_ROOT_USER_ACTION": "ignore",
            "PIP_NO_INDEX": None,
            "PIP_NO_CACHE_DIR": None,
            "HOME": "/home/p",
        },
    ),
    (
        "the packages dir before what the kernel had; the person's index kept",
        {
            "PYTHONPATH": "/a:/b",
            "PATH": "/usr/bin:/bin",
            "PIP_INDEX_URL": "https://mirror/simple",
        },
        {"lent": None, "no_index": False, "no_cache": False},
        {
            "PYTHONPATH": "/k/packages:/a:/b",
            "PATH": f"/k/packages/bin:{C}:/usr/bin:/bin",
            "PIP_INDEX_URL": "https://mirror/simple",
            "PIP_NO_INDEX": None,
        },
    ),
    (
        "a lent pip comes after the packages dir (a pip installed there wins)",
        {"PYTHONPATH": "/a", "PATH": "/usr/bin"},
        {"lent": L, "no_index": False, "no_cache": False},
        {"PYTHONPATH": f"/k/packages:{L}:/a"},
    ),
    (
        "no network: no index at all, the person's still set but not looked in",
        {"PATH": "/usr/bin", "PIP_INDEX_URL": "https://mirror/simple"},
        {"lent": None, "no_index": True, "no_cache": True},
        {
            "PIP_NO_INDEX": "1",
            "PIP_NO_CACHE_DIR": "1",
            "PIP_INDEX_URL": "https://mirror/simple",
        },
    ),
    (
        "empty entries are dropped",
        {"PYTHONPATH": "", "PATH": ":/usr/bin:"},
        {"lent": None, "no_index": False, "no_cache": False},
        {"PYTHONPATH": "/k/packages", "PATH": f"/k/packages/bin:{C}:/usr/bin"},
    ),
]


@pytest.mark.parametrize(
    ("case", "env", "options", "expected"), ENVIRONMENTS, ids=[c[0] for c in ENVIRONMENTS]
)
def test_the_environment_points_pip_and_the_kernel_at_the_dir(
    case: str, env: dict[str, str], options: dict[str, object], expected: dict[str, str | None]
) -> None:
    lent = options["lent"]
    assert lent is None or isinstance(lent, Path)
    made = pip_environment(
        env,
        P,
        commands=C,
        lent=lent,
        no_index=bool(options["no_index"]),
        no_cache=bool(options["no_cache"]),
    )
    assert {name: made.get(name) for name in expected} == expected


def rules(
    profile: str, *, network: bool, writable: tuple[str, ...] = ("/srv/proj",)
) -> SandboxRules:
    """Return rules of `profile` (confined unless it is `none`) writing in `writable`."""
    confined = profile != "none"
    return SandboxRules(
        profile=profile,
        confined=confined,
        writable=tuple(Path(p) for p in writable) if confined else (),
        hidden=(Path("/home/p/.ssh"),) if confined else (),
        network=parse_network(network),
        memory=None,
        processes=None,
    )


PROFILES = [
    ("none: the person's cache and index", rules("none", network=True), {}, None, None),
    (
        "workspace: network, a cache it cannot write",
        rules("workspace", network=True),
        {},
        None,
        "1",
    ),
    ("strict: no index, no cache", rules("strict", network=False), {}, "1", "1"),
    (
        "a cache the profile makes writable is used",
        rules("data", network=True, writable=("/srv/proj", "/home/p/.cache/pip")),
        {},
        None,
        None,
    ),
    (
        "PIP_CACHE_DIR names the cache",
        rules("workspace", network=True),
        {"PIP_CACHE_DIR": "/srv/proj/.pip-cache"},
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("case", "kernel_rules", "extra", "no_index", "no_cache"),
    PROFILES,
    ids=[c[0] for c in PROFILES],
)
def test_the_profile_decides_the_index_and_the_cache(
    case: str,
    kernel_rules: SandboxRules,
    extra: dict[str, str],
    no_index: str | None,
    no_cache: str | None,
) -> None:
    packages = KernelPackages(P, sys.executable, PipSource.OWN)
    made = packages.environment({"HOME": "/home/p", "PATH": "/usr/bin", **extra}, kernel_rules)
    assert (made.get("PIP_NO_INDEX"), made.get("PIP_NO_CACHE_DIR")) == (no_index, no_cache)
    assert made["PIP_TARGET"] == str(P)
    # A confined kernel's pip names the cache it may use: its cache home becomes its own.
    named = kernel_rules.confined and no_cache is None
    expected = extra.get("PIP_CACHE_DIR", "/home/p/.cache/pip") if named else None
    assert made.get("PIP_CACHE_DIR") == expected


CACHES = [
    ("the default", {"HOME": "/h"}, "/h/.cache/pip"),
    ("XDG_CACHE_HOME", {"HOME": "/h", "XDG_CACHE_HOME": "/c"}, "/c/pip"),
    ("PIP_CACHE_DIR", {"HOME": "/h", "PIP_CACHE_DIR": "/x/pip"}, "/x/pip"),
]


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS keeps caches in ~/Library/Caches")
@pytest.mark.parametrize(("case", "env", "expected"), CACHES, ids=[c[0] for c in CACHES])
def test_pips_cache_dir(case: str, env: dict[str, str], expected: str) -> None:
    assert pip_cache_dir(env) == Path(expected)


def test_the_pip_command_runs_the_kernels_own_python() -> None:
    script = command_script("/opt/my env/bin/python", PipSource.OWN)
    assert script == "#!/bin/sh\nexec '/opt/my env/bin/python' -m pip \"$@\"\n"
    assert command_script("/p/bin/python", PipSource.LENT).endswith(' -m pip "$@"\n')


def test_a_python_without_any_pip_gets_one_sentence_saying_what_to_do() -> None:
    script = command_script("/old/bin/python", PipSource.MISSING)
    assert "/old/bin/python has no pip" in script
    assert "/old/bin/python -m ensurepip" in script
    assert script.endswith(">&2\nexit 1\n")


def test_the_kernel_specs_interpreter(tmp_path: Path) -> None:
    found = tmp_path / "bin" / "python3.99"
    found.parent.mkdir()
    found.write_text("#!/bin/sh\n")
    found.chmod(0o755)
    env = {"PATH": f"/nowhere:{found.parent}"}
    major, minor = sys.version_info[:2]
    for own in ("python", f"python{major}", f"python{major}.{minor}"):
        assert kernel_interpreter(own, env, tmp_path) == sys.executable
    assert kernel_interpreter("python3.99", env, Path("/")) == str(found)
    assert kernel_interpreter("/opt/py/bin/python", env, tmp_path) == "/opt/py/bin/python"
    assert kernel_interpreter("env/bin/python", env, tmp_path) == str(tmp_path / "env/bin/python")
    assert kernel_interpreter("no-such-python", env, tmp_path) == "no-such-python"


def environment(root: Path, *, config: str | None, pip_in: str | None = None) -> str:
    """Make a Python environment's files under `root` (a pyvenv.cfg holding `config`, pip in
    `pip_in` below it) and return its interpreter's path; nothing in it runs."""
    python = root / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 99\n")
    if config is not None:
        (root / "pyvenv.cfg").write_text(config)
    (root / "lib" / "python3.11" / "site-packages").mkdir(parents=True)
    if pip_in is not None:
        (root / pip_in / "pip").mkdir(parents=True)
    return str(python)


VENV = "home = /nowhere/bin\ninclude-system-site-packages = false\nversion_info = 3.11.7\n"
SOURCES = [
    ("a venv with pip", VENV, "lib/python3.11/site-packages", PipSource.OWN),
    ("a uv venv without pip is lent the gateway's", VENV, None, PipSource.LENT),
    (
        "a Python too old for the gateway's pip",
        VENV.replace("3.11.7", "3.6.15"),
        None,
        PipSource.MISSING,
    ),
    ("a Python of no venv, with pip", None, "lib/python3.11/site-packages", PipSource.OWN),
    ("Debian's dist-packages", None, "lib/python3/dist-packages", PipSource.OWN),
    ("a Python of no venv, without pip", None, None, PipSource.LENT),
]


@pytest.mark.parametrize(
    ("case", "config", "pip_in", "expected"), SOURCES, ids=[c[0] for c in SOURCES]
)
def test_whether_a_kernels_python_has_pip_is_read_from_its_files(
    tmp_path: Path, case: str, config: str | None, pip_in: str | None, expected: PipSource
) -> None:
    assert gateway_pip() is not None  # pip is the gateway's dependency
    python = environment(tmp_path / "env", config=config, pip_in=pip_in)
    assert pip_source(python) is expected


def test_a_venv_that_includes_the_base_pythons_packages_has_its_pip(tmp_path: Path) -> None:
    base = environment(tmp_path / "base", config=None, pip_in="lib/python3.11/site-packages")
    config = f"home = {Path(base).parent}\ninclude-system-site-packages = true\n"
    assert pip_source(environment(tmp_path / "env", config=config)) is PipSource.OWN
    without = config.replace("true", "false")
    assert pip_source(environment(tmp_path / "other", config=without)) is PipSource.LENT


def test_the_gateways_own_python_has_its_pip() -> None:
    assert pip_source(sys.executable) is PipSource.OWN


def test_a_fifo_as_pyvenv_cfg_does_not_block_the_gateway(tmp_path: Path) -> None:
    python = environment(tmp_path / "env", config=None)
    os.mkfifo(tmp_path / "env" / "pyvenv.cfg")  # is_file() says no: not a venv
    assert pip_source(python) is PipSource.LENT


def test_prepare_writes_the_pip_commands_and_lends_pip_only_where_needed(tmp_path: Path) -> None:
    directory = tmp_path / "packages"
    own = KernelPackages(directory, "/p/bin/python", PipSource.OWN)
    own.prepare()
    for name in ("pip", "pip3"):
        command = own.commands / name
        assert command.read_text() == command_script("/p/bin/python", PipSource.OWN)
        assert stat.S_IMODE(command.stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert not own.lent.exists()
    lent = KernelPackages(directory, "/p/bin/python", PipSource.LENT)
    lent.prepare()
    assert (lent.lent / "pip").resolve() == gateway_pip()
    own.prepare()  # a later start, lending no more
    assert not own.lent.exists()


def test_prepare_follows_nothing_a_kernel_planted(tmp_path: Path) -> None:
    directory, outside = tmp_path / "packages", tmp_path / "outside"
    outside.mkdir()
    packages = KernelPackages(directory, "/p/bin/python", PipSource.OWN)
    packages.prepare()
    installed = directory / "mod.py"
    installed.write_text("x = 1\n")
    # What a kernel could do to loomgate's part of its dir, to have the gateway write elsewhere.
    (directory / OWN / "bin").rename(directory / OWN / "old")
    (directory / OWN / "bin").symlink_to(outside, target_is_directory=True)
    packages.prepare()
    assert list(outside.iterdir()) == []
    assert (packages.commands / "pip").is_file() and not packages.commands.is_symlink()
    (directory / OWN).rename(directory / "moved")
    (directory / OWN).symlink_to(outside, target_is_directory=True)
    packages.prepare()
    assert list(outside.iterdir()) == []
    assert not (directory / OWN).is_symlink()
    assert installed.read_text() == "x = 1\n"  # what pip installed stays


def test_the_packages_dir_goes_with_an_unconfined_kernels_sockets_and_only_in_kernel_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    root = tmp_path / f"loomgate-{os.getuid()}"
    kernel_dir = root / "0123456789abc"
    (kernel_dir / "ipc").mkdir(parents=True)
    (kernel_dir / "packages" / "mod").mkdir(parents=True)
    elsewhere = tmp_path / "project"
    (elsewhere / "ipc").mkdir(parents=True)
    (elsewhere / "packages").mkdir()
    remove_own_packages(elsewhere / "ipc" / "k")  # a connection file's own ipc path
    assert (elsewhere / "packages").is_dir()
    remove_own_packages(kernel_dir / "ipc" / "k")
    assert not (kernel_dir / "packages").exists()


# What the tests above leave open (each fails on a mutant of packages.py that bench/mutation.py
# found alive without it).
def test_the_sentence_of_a_python_without_any_pip() -> None:
    assert command_script("/old/bin/python", PipSource.MISSING) == (
        "#!/bin/sh\necho 'pip: /old/bin/python has no pip, and loomgate'\"'\"'s cannot run on "
        "it; install pip into that environment (/old/bin/python -m ensurepip), or use a kernel "
        "spec whose Python has pip.' >&2\nexit 1\n"
    )


def test_prepare_writes_the_sentence_where_no_pip_runs(tmp_path: Path) -> None:
    kernel = KernelPackages(tmp_path / "packages", "/old/bin/python", PipSource.MISSING)
    kernel.prepare()
    assert (kernel.commands / "pip").read_text() == command_script(
        "/old/bin/python", PipSource.MISSING
    )


@pytest.mark.parametrize("source", list(PipSource))
def test_the_kernels_environment_has_its_commands_and_a_lent_pip_only_when_lent(
    source: PipSource,
) -> None:
    kernel = KernelPackages(P, "/p/bin/python", source)
    made = kernel.environment({"PATH": "/usr/bin"}, rules("none", network=True))
    assert made["PATH"] == f"/k/packages/bin:{C}:/usr/bin"
    lent = [str(L)] if source is PipSource.LENT else []
    assert made["PYTHONPATH"] == os.pathsep.join(["/k/packages", *lent])


def test_a_bare_name_is_looked_up_on_the_default_path_when_the_kernel_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = tmp_path / "python-of-this-path-only"
    found.write_text("#!/bin/sh\n")
    found.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))  # the gateway's PATH is not the kernel's
    assert kernel_interpreter(found.name, {}, tmp_path) == found.name


def test_pips_cache_dir_on_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert pip_cache_dir({"HOME": "/Users/p"}) == Path("/Users/p/Library/Caches/pip")
    assert pip_cache_dir({"HOME": "/Users/p", "PIP_CACHE_DIR": "/x"}) == Path("/x")


def below(version: tuple[int, int]) -> str:
    """Return the X.Y just below `version`."""
    return f"{version[0]}.{version[1] - 1}"


def test_the_oldest_python_the_gateways_pip_runs_on_is_lent_it(tmp_path: Path) -> None:
    oldest = packages.gateway_pip_requires()
    assert oldest is not None and oldest[1] > 0
    at = f"home = /nowhere/bin\nversion = {oldest[0]}.{oldest[1]}.0\n"  # no version_info
    assert pip_source(environment(tmp_path / "at", config=at)) is PipSource.LENT
    older = f"home = /nowhere/bin\nversion = {below(oldest)}.0\n"
    assert pip_source(environment(tmp_path / "older", config=older)) is PipSource.MISSING


def test_a_python_of_no_venv_is_judged_by_its_lib_dir(tmp_path: Path) -> None:
    oldest = packages.gateway_pip_requires()
    assert oldest is not None
    python = Path(environment(tmp_path / "old", config=None))
    (python.parents[1] / "lib" / "python3.11").rename(
        python.parents[1] / "lib" / f"python{below(oldest)}"
    )
    assert pip_source(str(python)) is PipSource.MISSING
    bare = tmp_path / "bare" / "bin" / "python"  # no lib dir at all: its version is unknown
    bare.parent.mkdir(parents=True)
    bare.write_text("#!/bin/sh\nexit 99\n")
    assert pip_source(str(bare)) is PipSource.LENT


def test_removing_the_packages_of_a_kernel_that_has_none_is_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    kernel_dir = tmp_path / f"loomgate-{os.getuid()}" / "0123456789abc"
    (kernel_dir / "ipc").mkdir(parents=True)
    remove_own_packages(kernel_dir / "ipc" / "k")
    assert not (kernel_dir / "packages").exists()


def test_a_kernels_packages_are_found_for_its_spec_and_prepared(tmp_path: Path) -> None:
    kernel_dir = tmp_path / "k"
    kernel_dir.mkdir()
    kernel = KernelPackages.for_kernel(kernel_dir, "python", {"PATH": "/usr/bin"}, tmp_path)
    assert kernel == KernelPackages(kernel_dir / "packages", sys.executable, PipSource.OWN)
    assert (kernel.commands / "pip").read_text() == command_script(sys.executable, PipSource.OWN)


def test_a_kernels_interpreter_is_found_on_its_path_or_from_its_cwd(tmp_path: Path) -> None:
    found = Path(environment(tmp_path / "env", config=VENV)).with_name("kernel-python")
    found.write_text("#!/bin/sh\nexit 99\n")
    found.chmod(0o755)
    for argv0, env, cwd in [
        ("kernel-python", {"PATH": str(found.parent)}, Path("/")),
        ("env/bin/kernel-python", {}, tmp_path),
    ]:
        kernel_dir = tmp_path / f"k-{len(env)}"
        kernel_dir.mkdir()
        kernel = KernelPackages.for_kernel(kernel_dir, argv0, env, cwd)
        assert (kernel.interpreter, kernel.source) == (str(found), PipSource.LENT)
