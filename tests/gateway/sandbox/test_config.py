"""sandbox.toml: profiles over the built-ins, defaults, and every error with file and line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.network.network_rules import NO_NETWORK
from loomgate.gateway.sandbox.policy.config import (
    SandboxConfig,
    SandboxConfigError,
    UnknownProfile,
    load_sandbox_config,
    sandbox_file,
    syntax_error,
)
from loomgate.gateway.sandbox.policy.profiles import BUILT_IN, STRICT, WORKSPACE, GiB, MiB


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
        config.profile("data"), name="offline-data", network=NO_NETWORK, memory=None
    )
    # A built-in's name redefined overrides it, over the built-in of that name.
    assert config.profile("workspace") == replace(WORKSPACE, memory=2 * GiB, processes=None)
    assert config.profile("strict") == STRICT
    assert config.profile("none") == BUILT_IN["none"]
    assert set(config.profiles) == {"none", "workspace", "strict", "data", "offline-data"}


def test_protected_and_unprotected_names(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
[profiles.tools]
protected = [".github/workflows/", "Makefile"]
unprotected = [".idea", ".envrc"]

[profiles.child]
extends = "tools"
network = false

[profiles.git-read-only]
protected = [".git"]
""",
    )
    config = load_sandbox_config(path)
    tools = config.profile("tools")
    assert tools.protected == (".github/workflows", "Makefile")  # kept without the empty parts
    assert tools.unprotected == (".idea", ".envrc")
    names = tools.protected_names()
    assert ".idea" not in names and ".envrc" not in names and ".vscode" in names
    assert names[-2:] == (".github/workflows", "Makefile")
    assert config.profile("child").protected_names() == names  # extended as any key
    assert config.profile("git-read-only").protected_names()[-1] == ".git"
    assert config.profile("workspace").protected_names() == WORKSPACE.protected_names()


def test_extends_defaults_to_workspace_and_follows_the_files_workspace(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[profiles.workspace]\nmemory = "1GiB"\n\n[profiles.mine]\nnetwork = false\n'
        '\n[profiles.deep]\nextends = "mine"\nprocesses = 64\n\n[profiles.s]\nextends = "strict"\n',
    )
    config = load_sandbox_config(path)
    assert config.profile("mine") == replace(WORKSPACE, name="mine", memory=GiB, network=NO_NETWORK)
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
    ('default = "workspace\n', 1, "invalid TOML: Illegal character '\\n' (column 21)"),
    ("default = \n", 1, "invalid TOML: Invalid value (column 11)"),
    ("\n\n[profiles.a]\nnetwork = nope\n", 4, "invalid TOML: Invalid value (column 11)"),
    ('[profiles.a]\nwritable = ["x",\n', 2, "invalid TOML: Invalid value (at the end of the file)"),
    ('default = "a"\ndefault = "b"\n', 2, "invalid TOML: Cannot overwrite a value (column 14)"),
    # top level
    (
        'defualt = "strict"\n',
        1,
        "unknown key 'defualt' (allowed: default, jupyter_api, jupyter_api_open_to_agents, "
        "profiles)",
    ),
    (
        "\n[sandbox]\nx = 1\n",
        2,
        "unknown key 'sandbox' (allowed: default, jupyter_api, jupyter_api_open_to_agents, "
        "profiles)",
    ),
    ("default = 3\n", 1, "'default' must be a profile's name in quotes"),
    (
        '\ndefault = "lax"\n',
        2,
        "'default' names profile 'lax', which is not defined (the profiles: none, strict, "
        "workspace)",
    ),
    (
        'jupyter_api = "lax"\n',
        1,
        "'jupyter_api' names profile 'lax', which is not defined (the profiles: none, strict, "
        "workspace)",
    ),
    ('profiles = "x"\n', 1, "'profiles' must be a table of [profiles.NAME] tables"),
    # profile names and tables
    (
        "[profiles.none]\n",
        1,
        "profile 'none' is built in (no sandbox) and cannot be redefined; give your profile "
        "another name",
    ),
    (
        '[profiles.none]\nwritable = ["/"]\n',
        1,
        "profile 'none' is built in (no sandbox) and cannot be redefined; give your profile "
        "another name",
    ),
    (
        '[profiles."a b"]\n',
        1,
        "profile name 'a b' is not allowed: use letters, digits, '-' and '_' (at most 40, "
        "starting with a letter or digit)",
    ),
    (
        '[profiles]\n"-x" = {}\n',
        2,
        "profile name '-x' is not allowed: use letters, digits, '-' and '_' (at most 40, starting "
        "with a letter or digit)",
    ),
    ("[profiles]\na = 1\n", 2, "profile 'a' must be a table ([profiles.a])"),
    (
        '[profiles.a]\nnetwork = true\nwriteable = ["{cwd}"]\n',
        3,
        "profile 'a' has an unknown key 'writeable' (allowed: extends, writable, hidden, "
        "protected, unprotected, readable, network, memory, processes)",
    ),
    # protected, unprotected
    (
        '[profiles.a]\nprotected = ".envrc"\n',
        2,
        "profile 'a': 'protected' must be a list of names in quotes, each relative to every "
        'writable directory (e.g. protected = [".envrc", ".github/workflows"])',
    ),
    (
        '[profiles.a]\nunprotected = [\n  ".idea",\n  3,\n]\n',
        2,
        "profile 'a': 'unprotected' must be a list of names in quotes, each relative to every "
        'writable directory (e.g. unprotected = [".envrc", ".github/workflows"])',
    ),
    (
        '[profiles.a]\nprotected = [\n  "notes.md",\n  "/etc/x",\n]\n',
        4,
        "profile 'a': protected: protected name '/etc/x' is not relative: write it as a name in "
        "each writable directory (e.g. '.envrc' or '.github/workflows')",
    ),
    (
        '[profiles.a]\nprotected = ["../x"]\n',
        2,
        "profile 'a': protected: protected name '../x' holds '.' or '..': write the name itself",
    ),
    ('[profiles.a]\nprotected = [""]\n', 2, "profile 'a': protected: a protected name is empty"),
    (
        '[profiles.a]\nunprotected = [".git"]\n',
        2,
        "profile 'a': unprotected: '.git' is always read-only (its hooks and config run outside): "
        "it cannot be taken out",
    ),
    (
        '[profiles.a]\n\nunprotected = [\n  ".idea",\n  "notes.md",\n]\n',
        5,
        "profile 'a': unprotected: 'notes.md' is not protected by default, so it cannot be taken "
        "out (the defaults: .mcp.json, .claude, .codex, .cursor, .vscode, .idea, .envrc, "
        ".gitmodules, .pre-commit-config.yaml, .husky, .npmrc, .yarnrc, .yarnrc.yml, "
        ".devcontainer, CLAUDE.md, AGENTS.md, GEMINI.md, .gemini, .windsurfrules, .clinerules, "
        ".github/copilot-instructions.md, .venv, venv, node_modules, "
        "ipython_config.py, ipython_kernel_config.py, .ipython, .jupyter, "
        "jupyter_config.py, jupyter_config.json, jupyter_server_config.py, "
        "jupyter_server_config.json, jupyter_notebook_config.py, jupyter_notebook_config.json, "
        "jupyter_lab_config.py, jupyter_lab_config.json, jupyter_nbconvert_config.py, "
        "jupyter_nbconvert_config.json, jupyter_console_config.py, jupyter_console_config.json, "
        "jupyter_qtconsole_config.py, jupyter_qtconsole_config.json, jupyter_nbclassic_config.py, "
        "jupyter_nbclassic_config.json, jupyter_kernel_gateway_config.py, "
        "jupyter_kernel_gateway_config.json, jupyter_execute_config.py, "
        "jupyter_execute_config.json)",
    ),
    # extends
    (
        '[profiles.a]\nextends = "lax"\n',
        2,
        "profile 'a' extends 'lax', which is not defined (the profiles: a, strict, workspace)",
    ),
    (
        '[profiles.a]\nextends = "none"\n',
        2,
        "profile 'a' cannot extend 'none', which is no sandbox; extend 'workspace' or 'strict'",
    ),
    ("[profiles.a]\nextends = 1\n", 2, "profile 'a': 'extends' must be a profile's name in quotes"),
    (
        '[profiles.a]\nextends = "b"\n[profiles.b]\nextends = "a"\n',
        4,
        "profiles extend each other in a circle (a → b → a)",
    ),
    (
        '[profiles.workspace]\nextends = "a"\n[profiles.a]\n',
        3,
        "profiles extend each other in a circle (workspace → a → workspace)",
    ),
    # paths
    (
        '[profiles.a]\nwritable = "{cwd}"\n',
        2,
        "profile 'a': 'writable' must be a list of paths in quotes (e.g. writable = [\"{cwd}\", "
        '"~/.cache/pip"])',
    ),
    (
        "[profiles.a]\nhidden = [1]\n",
        2,
        "profile 'a': 'hidden' must be a list of paths in quotes (e.g. hidden = [\"{cwd}\", "
        '"~/.cache/pip"])',
    ),
    (
        '[profiles.a]\nwritable = [\n  "{cwd}",\n  "data",\n]\n',
        4,
        "profile 'a': writable: path 'data' is relative: write it as {cwd}/data, ~/data or an "
        "absolute path",
    ),
    (
        '[profiles.a]\nhidden = ["~bob/x"]\n',
        2,
        "profile 'a': hidden: path '~bob/x' names another user's home: write ~/… (yours) or an "
        "absolute path",
    ),
    (
        '[profiles.a]\nhidden = ["/x/{cwd}"]\n',
        2,
        "profile 'a': hidden: path '/x/{cwd}' uses {cwd} inside it: {cwd} may only begin a path",
    ),
    ('[profiles.a]\nwritable = [""]\n', 2, "profile 'a': writable: a path is empty"),
    (
        '[profiles.a]\nwritable = ["~"]\n',
        2,
        "profile 'a': writable path '~' is your home directory: a kernel that may write there "
        "could change your shell's start-up files and run code outside its sandbox",
    ),
    (
        '[profiles.a]\nwritable = ["/"]\n',
        2,
        "profile 'a': writable path '/' is the whole file system: a kernel that may write there "
        "could change your shell's start-up files and run code outside its sandbox",
    ),
    (
        '[profiles.a]\nwritable = ["~/.ssh/x"]\n',
        2,
        "profile 'a': writable path '~/.ssh/x' lies inside the hidden path '~/.ssh': a kernel "
        "cannot write where it cannot see",
    ),
    (
        '[profiles.a]\nwritable = ["/run/dbus"]\n',
        2,
        "profile 'a': writable path '/run/dbus' lies inside the hidden path '/run/dbus': a kernel "
        "cannot write where it cannot see",
    ),
    (
        '[profiles.a]\nhidden = ["{cwd}/d"]\nwritable = ["{cwd}/d/e"]\n',
        3,
        "profile 'a': writable path '{cwd}/d/e' lies inside the hidden path '{cwd}/d': a kernel "
        "cannot write where it cannot see",
    ),
    (
        '[profiles.a]\nextends = "b"\n[profiles.b]\nwritable = ["~/.aws"]\n',
        4,
        "profile 'b': writable path '~/.aws' lies inside the hidden path '~/.aws': a kernel "
        "cannot write where it cannot see",
    ),
    # network, memory, processes
    (
        '[profiles.a]\nnetwork = "off"\n',
        2,
        "profile 'a': 'network': network = 'off' is not allowed: write true, false, \"host\" or "
        "a list (network = ['off'])",
    ),
    (
        '[profiles.a]\nmemory = "4 gigs"\n',
        2,
        "profile 'a': 'memory': '4 gigs' has an unknown unit 'gigs': use B, KiB, MiB, GiB, TiB "
        "(or K, M, G, T), or KB, MB, GB, TB for powers of 1000",
    ),
    (
        "[profiles.a]\nmemory = 0\n",
        2,
        "profile 'a': 'memory': size 0 is not positive: write e.g. '4GiB', '512MiB', '2G' or a "
        "number of bytes",
    ),
    (
        "[profiles.a]\nmemory = true\n",
        2,
        "profile 'a': 'memory' must be a size (e.g. \"4GiB\", \"512MiB\" or a number of bytes), "
        "or false for no limit",
    ),
    (
        "[profiles.a]\nmemory = 1.5\n",
        2,
        "profile 'a': 'memory' must be a size (e.g. \"4GiB\", \"512MiB\" or a number of bytes), "
        "or false for no limit",
    ),
    (
        '[profiles.a]\nprocesses = "512"\n',
        2,
        "profile 'a': 'processes' must be a positive number (processes and threads together, e.g. "
        "512), or false for no limit",
    ),
    (
        "[profiles.a]\nprocesses = 0\n",
        2,
        "profile 'a': 'processes' must be a positive number (processes and threads together, e.g. "
        "512), or false for no limit",
    ),
    (
        "[profiles.a]\nprocesses = true\n",
        2,
        "profile 'a': 'processes' must be a positive number (processes and threads together, e.g. "
        "512), or false for no limit",
    ),
    # the inline form points at its line
    (
        "[profiles]\na = { network = 1 }\n",
        2,
        "profile 'a': 'network': network must be true, false, \"host\" or a list of patterns, "
        "not 1",
    ),
    # the line of a conflict is that of the key the profile writes
    (
        '[profiles.a]\nhidden = ["{cwd}"]\n',
        2,
        "profile 'a': writable path '{cwd}' lies inside the hidden path '{cwd}': a kernel cannot "
        "write where it cannot see",
    ),
    (
        '[profiles.a]\nwritable = ["~/./.ssh"]\n',
        2,
        "profile 'a': writable path '~/./.ssh' lies inside the hidden path '~/.ssh': a kernel "
        "cannot write where it cannot see",
    ),
    (
        '[profiles.a]\nwritable = ["~/.ssh/../data", "~"]\n',
        2,
        "profile 'a': writable path '~' is your home directory: a kernel that may write there "
        "could change your shell's start-up files and run code outside its sandbox",
    ),
    (
        '[profiles.a]\nwritable = ["~/.config/gh/x"]\n',
        2,
        "profile 'a': writable path '~/.config/gh/x' lies inside the hidden path '~/.config/gh': "
        "a kernel cannot write where it cannot see",
    ),
    (
        '[profiles.a]\nextends = "lax"\n[profiles.b]\n',
        2,
        "profile 'a' extends 'lax', which is not defined (the profiles: a, b, strict, workspace)",
    ),
    (
        "[profiles.a]\nprocesses = -3\n",
        2,
        "profile 'a': 'processes' must be a positive number (processes and threads together, e.g. "
        "512), or false for no limit",
    ),
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
    assert error.message == message


def test_a_file_that_is_not_text(tmp_path: Path) -> None:
    path = write(tmp_path, b'default = "strict"\n# \xff\n')
    with pytest.raises(SandboxConfigError) as refused:
        load_sandbox_config(path)
    assert (refused.value.path, refused.value.line) == (path, 2)
    assert str(refused.value) == f"{path}:2: is not UTF-8 text"


def test_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    path = tmp_path / "sandbox.toml"
    path.mkdir()
    with pytest.raises(SandboxConfigError) as refused:
        load_sandbox_config(path)
    assert (refused.value.path, refused.value.line) == (path, None)
    assert str(refused.value) == f"{path}: cannot be read (Is a directory)"


@pytest.mark.parametrize(
    ("value", "processes"), [("1", 1), ("512", 512), ('"none"', None), ("false", None)]
)
def test_processes_values(tmp_path: Path, value: str, processes: int | None) -> None:
    path = write(tmp_path, f"[profiles.p]\nprocesses = {value}\n")
    assert load_sandbox_config(path).profile("p").processes == processes


def test_an_unknown_profile_without_a_file_names_where_to_define_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(UnknownProfile) as refused:
        SandboxConfig().profile("lax")
    assert str(refused.value) == (
        "There is no sandbox profile 'lax': the profiles are none, strict, workspace "
        f"(define others in {tmp_path / 'loomgate' / 'sandbox.toml'})."
    )


class TomlError(ValueError):
    """A TOML error as Python 3.14's tomllib gives it: lineno and colno beside the message."""

    def __init__(self, message: str, lineno: int | None, colno: int | None) -> None:
        super().__init__(message)
        self.lineno = lineno
        self.colno = colno


@pytest.mark.parametrize(
    ("text", "error", "expected"),
    [
        ("a\nb\n", ValueError("Bad (at line 2, column 3)"), (2, "invalid TOML: Bad (column 3)")),
        (
            "a\nb\n",
            ValueError("Bad (at end of document)"),
            (2, "invalid TOML: Bad (at the end of the file)"),
        ),
        (
            "a\nb",
            ValueError("Bad (at end of document)"),
            (2, "invalid TOML: Bad (at the end of the file)"),
        ),
        (
            "a",
            ValueError("Bad (at end of document)"),
            (1, "invalid TOML: Bad (at the end of the file)"),
        ),
        (
            "",
            ValueError("Bad (at end of document)"),
            (1, "invalid TOML: Bad (at the end of the file)"),
        ),
        ("a\nb\nc", ValueError("Bad\nmore"), (3, "invalid TOML: Bad (at the end of the file)")),
        ("a\n", ValueError(""), (1, "invalid TOML: invalid TOML (at the end of the file)")),
        ("a\nb\nc\n", TomlError("Bad", 2, 5), (2, "invalid TOML: Bad (column 5)")),
        (
            "a\nb\nc\n",
            TomlError("Bad (at line 1, column 4)", 2, 5),
            (1, "invalid TOML: Bad (column 4)"),
        ),
        (
            "a\nb\nc\n",
            TomlError("Bad", None, None),
            (3, "invalid TOML: Bad (at the end of the file)"),
        ),
    ],
)
def test_syntax_error(text: str, error: ValueError, expected: tuple[int, str]) -> None:
    assert syntax_error(text, error) == expected


def test_readable_paths_and_notebook_kernels_open_to_agents(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'jupyter_api_open_to_agents = true\n\n[profiles.tool]\nreadable = ["~/.newtool", "~/x/y"]\n'
        '\n[profiles.more]\nextends = "tool"\nmemory = "1GiB"\n',
    )
    config = load_sandbox_config(path)
    assert config.jupyter_api_open_to_agents is True
    assert config.profile("tool").readable == ("~/.newtool", "~/x/y")
    assert config.profile("more").readable == ("~/.newtool", "~/x/y")  # extended
    assert config.profile("workspace").readable == ()
    assert (
        load_sandbox_config(write(tmp_path, 'default = "strict"\n')).jupyter_api_open_to_agents
        is False
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            '\n[profiles.a]\nreadable = ["/srv/data"]\n',
            3,
            "profile 'a': 'readable' names paths in your home dir (~/x), not '/srv/data': the "
            "rest of the file system is readable already",
        ),
        (
            '[profiles.a]\nreadable = ["~/ok", "{cwd}/x"]\n',
            2,
            "profile 'a': 'readable' names paths in your home dir (~/x), not '{cwd}/x': the "
            "rest of the file system is readable already",
        ),
        (
            '[profiles.a]\nreadable = "~/x"\n',
            2,
            "profile 'a': 'readable' must be a list of paths in quotes "
            '(e.g. readable = ["{cwd}", "~/.cache/pip"])',
        ),
        (
            '\njupyter_api_open_to_agents = "yes"\n',
            2,
            "'jupyter_api_open_to_agents' must be true or false",
        ),
    ],
)
def test_readable_and_open_to_agents_are_refused_when_malformed(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SandboxConfigError) as raised:
        load_sandbox_config(path)
    assert (raised.value.line, raised.value.message) == (line, message)
