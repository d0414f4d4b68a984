"""sandbox.toml: profiles over the built-ins, defaults, and every error with file and line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.config import (
    SandboxConfig,
    SandboxConfigError,
    UnknownProfile,
    load_sandbox_config,
    sandbox_file,
)
from loomgate.gateway.sandbox.profiles import BUILT_IN, STRICT, WORKSPACE, GiB, MiB


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "sandbox.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_no_file_gives_the_built_ins(tmp_path: Path) -> None:
    config = load_sandbox_config(tmp_path / "missing.toml")
    assert config == SandboxConfig("workspace", "none", BUILT_IN, None)
    assert config.profile("strict") == STRICT


def test_the_file_is_in_the_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert sandbox_file() == tmp_path / "loomgate" / "sandbox.toml"
    assert load_sandbox_config().path is None
    (tmp_path / "loomgate").mkdir()
    (tmp_path / "loomgate" / "sandbox.toml").write_text('default = "strict"\n')
    config = load_sandbox_config()
    assert (config.default, config.path) == ("strict", tmp_path / "loomgate" / "sandbox.toml")


def test_a_full_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
default = "data"
jupyter_api = "strict"

[profiles.data]
writable = ["{cwd}", "/srv/data", "~/.cache/pip"]
hidden = ["~/private", "{cwd}/.env"]
memory = "8GiB"
processes = 1024

[profiles.offline-data]
extends = "data"
network = false
memory = false

[profiles.workspace]
memory = "2G"
processes = false
""",
    )
    config = load_sandbox_config(path)
    assert (config.default, config.jupyter_api, config.path) == ("data", "strict", path)
    assert config.profile("data") == replace(
        WORKSPACE,
        name="data",
        writable=("{cwd}", "/srv/data", "~/.cache/pip"),
        hidden=("~/private", "{cwd}/.env"),
        memory=8 * GiB,
        processes=1024,
    )
    assert config.profile("offline-data") == replace(
        config.profile("data"), name="offline-data", network=False, memory=None
    )
    # A built-in's name redefined overrides it, over the built-in of that name.
    assert config.profile("workspace") == replace(WORKSPACE, memory=2 * GiB, processes=None)
    assert config.profile("strict") == STRICT
    assert config.profile("none") == BUILT_IN["none"]
    assert set(config.profiles) == {"none", "workspace", "strict", "data", "offline-data"}


def test_extends_defaults_to_workspace_and_follows_the_files_workspace(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[profiles.workspace]\nmemory = "1GiB"\n\n[profiles.mine]\nnetwork = false\n'
        '\n[profiles.deep]\nextends = "mine"\nprocesses = 64\n\n[profiles.s]\nextends = "strict"\n',
    )
    config = load_sandbox_config(path)
    assert config.profile("mine") == replace(WORKSPACE, name="mine", memory=GiB, network=False)
    assert config.profile("deep") == replace(config.profile("mine"), name="deep", processes=64)
    assert config.profile("s") == replace(STRICT, name="s")


@pytest.mark.parametrize(
    ("value", "memory"),
    [('"512MiB"', 512 * MiB), ("1073741824", GiB), ('"none"', None), ("false", None)],
)
def test_memory_values(tmp_path: Path, value: str, memory: int | None) -> None:
    path = write(tmp_path, f"[profiles.p]\nmemory = {value}\n")
    assert load_sandbox_config(path).profile("p").memory == memory


def test_an_unknown_profile_names_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, "[profiles.data]\n")
    with pytest.raises(UnknownProfile) as refused:
        load_sandbox_config(path).profile("lax")
    assert str(refused.value) == (
        f"There is no sandbox profile 'lax': the profiles are data, none, strict, workspace "
        f"(define others in {path})."
    )


BAD = [
    # syntax
    ('default = "workspace\n', 1, "invalid TOML: Illegal character"),
    ("default = \n", 1, "invalid TOML: Invalid value"),
    ("\n\n[profiles.a]\nnetwork = nope\n", 4, "invalid TOML: Invalid value (column 11)"),
    ('[profiles.a]\nwritable = ["x",\n', 2, "invalid TOML"),
    ('default = "a"\ndefault = "b"\n', 2, "invalid TOML: Cannot overwrite a value"),
    # top level
    ('defualt = "strict"\n', 1, "unknown key 'defualt' (allowed: default, jupyter_api, profiles)"),
    ("\n[sandbox]\nx = 1\n", 2, "unknown key 'sandbox'"),
    ("default = 3\n", 1, "'default' must be a profile's name in quotes"),
    (
        '\ndefault = "lax"\n',
        2,
        "'default' names profile 'lax', which is not defined (the profiles:",
    ),
    ('jupyter_api = "lax"\n', 1, "'jupyter_api' names profile 'lax'"),
    ('profiles = "x"\n', 1, "'profiles' must be a table of [profiles.NAME] tables"),
    # profile names and tables
    ("[profiles.none]\n", 1, "profile 'none' is built in (no sandbox) and cannot be redefined"),
    ('[profiles.none]\nwritable = ["/"]\n', 1, "profile 'none' is built in"),
    ('[profiles."a b"]\n', 1, "profile name 'a b' is not allowed"),
    ('[profiles]\n"-x" = {}\n', 2, "profile name '-x' is not allowed"),
    ("[profiles]\na = 1\n", 2, "profile 'a' must be a table ([profiles.a])"),
    (
        '[profiles.a]\nnetwork = true\nwriteable = ["{cwd}"]\n',
        3,
        "profile 'a' has an unknown key 'writeable' (allowed: extends,",
    ),
    # extends
    ('[profiles.a]\nextends = "lax"\n', 2, "profile 'a' extends 'lax', which is not defined"),
    ('[profiles.a]\nextends = "none"\n', 2, "profile 'a' cannot extend 'none'"),
    ("[profiles.a]\nextends = 1\n", 2, "'extends' must be a profile's name"),
    ('[profiles.a]\nextends = "b"\n[profiles.b]\nextends = "a"\n', 4, "in a circle (a → b → a)"),
    (
        '[profiles.workspace]\nextends = "a"\n[profiles.a]\n',
        3,
        "in a circle (workspace → a → workspace)",
    ),
    # paths
    ('[profiles.a]\nwritable = "{cwd}"\n', 2, "'writable' must be a list of paths in quotes"),
    ("[profiles.a]\nhidden = [1]\n", 2, "'hidden' must be a list of paths"),
    (
        '[profiles.a]\nwritable = [\n  "{cwd}",\n  "data",\n]\n',
        4,
        "writable: path 'data' is relative: write it as {cwd}/data",
    ),
    ('[profiles.a]\nhidden = ["~bob/x"]\n', 2, "hidden: path '~bob/x' names another user's home"),
    ('[profiles.a]\nhidden = ["/x/{cwd}"]\n', 2, "{cwd} may only begin a path"),
    ('[profiles.a]\nwritable = [""]\n', 2, "a path is empty"),
    ('[profiles.a]\nwritable = ["~"]\n', 2, "writable path '~' is your home directory"),
    ('[profiles.a]\nwritable = ["/"]\n', 2, "writable path '/' is the whole file system"),
    (
        '[profiles.a]\nwritable = ["~/.ssh/x"]\n',
        2,
        "writable path '~/.ssh/x' lies inside the hidden path '~/.ssh'",
    ),
    ('[profiles.a]\nwritable = ["/run/dbus"]\n', 2, "lies inside the hidden path '/run/dbus'"),
    (
        '[profiles.a]\nhidden = ["{cwd}/d"]\nwritable = ["{cwd}/d/e"]\n',
        3,
        "lies inside the hidden path '{cwd}/d'",
    ),
    (
        '[profiles.a]\nextends = "b"\n[profiles.b]\nwritable = ["~/.aws"]\n',
        4,
        "profile 'b': writable path '~/.aws'",
    ),
    # network, memory, processes
    ('[profiles.a]\nnetwork = "off"\n', 2, "'network' must be true or false"),
    (
        '[profiles.a]\nmemory = "4 gigs"\n',
        2,
        "profile 'a': 'memory': '4 gigs' has an unknown unit 'gigs'",
    ),
    ("[profiles.a]\nmemory = 0\n", 2, "'memory': size 0 is not positive"),
    ("[profiles.a]\nmemory = true\n", 2, "'memory' must be a size"),
    ("[profiles.a]\nmemory = 1.5\n", 2, "'memory' must be a size"),
    ('[profiles.a]\nprocesses = "512"\n', 2, "'processes' must be a positive number"),
    ("[profiles.a]\nprocesses = 0\n", 2, "'processes' must be a positive number"),
    ("[profiles.a]\nprocesses = true\n", 2, "'processes' must be a positive number"),
    # the inline form points at its line
    ("[profiles]\na = { network = 1 }\n", 2, "'network' must be true or false"),
]


@pytest.mark.parametrize(("text", "line", "message"), BAD)
def test_a_malformed_file_is_refused_with_its_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SandboxConfigError) as refused:
        load_sandbox_config(path)
    error = refused.value
    assert (error.path, error.line) == (path, line)
    assert str(error).startswith(f"{path}:{line}: ")
    assert message in error.message, error.message


def test_a_file_that_is_not_text(tmp_path: Path) -> None:
    path = write(tmp_path, b'default = "strict"\n# \xff\n')
    with pytest.raises(SandboxConfigError, match=r":2: is not UTF-8 text$"):
        load_sandbox_config(path)


def test_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    path = tmp_path / "sandbox.toml"
    path.mkdir()
    with pytest.raises(SandboxConfigError) as refused:
        load_sandbox_config(path)
    assert refused.value.line is None
    assert str(refused.value).startswith(f"{path}: cannot be read (")
