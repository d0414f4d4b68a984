"""Sandbox profiles: built-ins, rules made concrete for a kernel, strictness, sizes."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.network.network_rules import (
    HOST_NETWORK,
    NO_NETWORK,
    PUBLIC,
    parse_network,
)
from loomgate.gateway.sandbox.policy.profiles import (
    ALWAYS_HIDDEN,
    BUILT_IN,
    DEFAULT_MEMORY,
    DEFAULT_PROCESSES,
    NONE,
    STRICT,
    WORKSPACE,
    GiB,
    MiB,
    SandboxProfile,
    SandboxRules,
    SandboxRulesError,
    at_least_as_strict,
    concrete_path,
    default_memory,
    default_processes,
    lies_inside,
    outermost,
    physical_memory,
    session_runtime_dirs,
    written_path_problem,
)
from loomgate.gateway.sandbox.policy.protected_names import DEFAULT_PROTECTED

NO_RUNTIME: tuple[Path, ...] = ()


@pytest.fixture
def place(tmp_path: Path) -> tuple[Path, Path]:
    """A home and a project inside it, both real directories."""
    home = tmp_path / "home"
    cwd = home / "project"
    cwd.mkdir(parents=True)
    return home.resolve(), cwd.resolve()


def test_built_ins() -> None:
    assert dict(BUILT_IN) == {"none": NONE, "workspace": WORKSPACE, "strict": STRICT}
    assert (NONE.confined, NONE.writable, NONE.network, NONE.memory) == (
        False,
        (),
        HOST_NETWORK,
        None,
    )
    # Every public address, through the gateway's proxy; strict: no network at all.
    assert WORKSPACE.confined and WORKSPACE.writable == ("{cwd}",)
    assert WORKSPACE.network == PUBLIC
    assert (WORKSPACE.memory, WORKSPACE.processes) == (DEFAULT_MEMORY, DEFAULT_PROCESSES)
    assert replace(WORKSPACE, name="strict", network=NO_NETWORK) == STRICT


def test_the_defaults_follow_the_machine() -> None:
    physical = physical_memory()
    assert physical is not None and physical > 0  # Linux and macOS both say
    assert DEFAULT_MEMORY == default_memory(physical) <= physical // 2
    assert DEFAULT_PROCESSES >= 512


@pytest.mark.parametrize(
    ("physical", "expected"),
    [
        (None, 4 * GiB),
        (16 * GiB, 8 * GiB),
        (25275990016, 12052 * MiB),  # half, rounded down to a whole MiB
        (3 * MiB, MiB),
        (MiB // 2, MiB),
    ],
)
def test_default_memory(physical: int | None, expected: int) -> None:
    assert default_memory(physical) == expected
    assert type(default_memory(physical)) is int  # a whole number of bytes, not a float


def sysconf(pages: int, page_size: int | Exception) -> Callable[[str], int]:
    """A sysconf() that tells `pages` pages of `page_size` bytes (or raises it)."""

    def answer(name: str) -> int:
        if isinstance(page_size, Exception):
            raise page_size
        return {"SC_PHYS_PAGES": pages, "SC_PAGE_SIZE": page_size}[name]

    return answer


@pytest.mark.parametrize(
    ("pages", "page_size", "expected"),
    [
        (1000, 4096, 4096000),
        (1, 4096, 4096),
        (1000, 1, 1000),
        (0, 4096, None),
        (-1, 4096, None),  # sysconf's "unknown"
        (1000, 0, None),
        (1000, -1, None),
        (-1, -1, None),
        (1000, ValueError("SC_PHYS_PAGES"), None),  # a name this OS does not know
        (1000, OSError(22, "Invalid argument"), None),
    ],
)
def test_physical_memory(pages: int, page_size: int | Exception, expected: int | None) -> None:
    assert physical_memory(sysconf(pages, page_size)) == expected


@pytest.mark.parametrize(
    ("cpus", "expected"), [(None, 512), (1, 512), (8, 512), (9, 576), (64, 4096)]
)
def test_default_processes(cpus: int | None, expected: int) -> None:
    assert default_processes(cpus) == expected


@pytest.mark.parametrize(
    ("environ", "uid", "expected"),
    [
        ({"XDG_RUNTIME_DIR": "/run/user/1000"}, 1000, ("/run/user/1000",)),
        ({"XDG_RUNTIME_DIR": "/tmp/rt"}, 1000, ("/tmp/rt", "/run/user/1000")),
        ({}, 501, ("/run/user/501",)),
        ({"XDG_RUNTIME_DIR": "relative"}, 7, ("/run/user/7",)),
        ({"XDG_RUNTIME_DIR": ""}, 0, ("/run/user/0",)),
    ],
)
def test_session_runtime_dirs(environ: dict[str, str], uid: int, expected: tuple[str, ...]) -> None:
    assert session_runtime_dirs(environ, uid) == tuple(Path(p) for p in expected)


def test_session_runtime_dirs_default_to_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/tmp/rt-of-this-test")
    assert session_runtime_dirs() == (
        Path("/tmp/rt-of-this-test"),
        Path(f"/run/user/{os.getuid()}"),
    )
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert session_runtime_dirs() == (Path(f"/run/user/{os.getuid()}"),)


def test_rules_hide_this_sessions_runtime_dirs_by_default(
    place: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    home, cwd = place
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/tmp/rt-of-this-test")
    hidden = WORKSPACE.rules(cwd=cwd, home=home).hidden
    assert {Path("/tmp/rt-of-this-test"), Path(f"/run/user/{os.getuid()}")} <= set(hidden)


def test_none_is_not_confined(place: tuple[Path, Path]) -> None:
    home, cwd = place
    assert NONE.rules(cwd=cwd, home=home, private=(home / "state",)) == SandboxRules(
        "none", False, (), (), HOST_NETWORK, None, None
    )


def test_workspace_rules(place: tuple[Path, Path], tmp_path: Path) -> None:
    home, cwd = place
    state = tmp_path / "state"
    runtime = tmp_path / "runtime"
    rules = WORKSPACE.rules(cwd=cwd, home=home, private=(state,), session_runtime=(runtime,))
    assert rules.profile == "workspace" and rules.confined and rules.network == PUBLIC
    assert rules.writable == (cwd,)
    for written in ("~/.ssh", "~/.aws", "~/.netrc", "~/.config/gh", "~/Library/Keychains"):
        assert home / written[2:] in rules.hidden
    assert {state.resolve(), runtime.resolve(), Path("/run/dbus")} <= set(rules.hidden)
    assert all(p.is_absolute() for p in rules.hidden)
    assert list(rules.hidden) == sorted(set(rules.hidden))
    assert (rules.memory, rules.processes) == (DEFAULT_MEMORY, DEFAULT_PROCESSES)
    assert STRICT.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME).network == NO_NETWORK


def test_symlinks_are_resolved_where_they_exist(place: tuple[Path, Path], tmp_path: Path) -> None:
    home, cwd = place
    keys = tmp_path / "elsewhere" / "keys"
    keys.mkdir(parents=True)
    (home / ".ssh").symlink_to(keys)
    (cwd / "out").symlink_to(tmp_path / "elsewhere" / "missing" / "deeper")
    profile = replace(WORKSPACE, writable=("{cwd}/out/x",), hidden=("{cwd}/../secret/../more",))
    rules = profile.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME)
    assert keys.resolve() in rules.hidden and home / ".ssh" not in rules.hidden
    assert rules.writable == (tmp_path.resolve() / "elsewhere" / "missing" / "deeper" / "x",)
    assert home / "more" in rules.hidden  # normalised lexically where nothing exists


def test_nested_and_repeated_paths_are_dropped(place: tuple[Path, Path]) -> None:
    home, cwd = place
    profile = replace(
        WORKSPACE,
        writable=("{cwd}", "{cwd}/sub", "~/project/sub/deeper", "/srv/data", "/srv/data/"),
        hidden=("~/.config", "~/.config", "{cwd}/.env"),
    )
    rules = profile.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME)
    assert rules.writable == (Path("/srv/data"), cwd)
    assert home / ".config" in rules.hidden and home / ".config" / "gh" not in rules.hidden
    assert cwd / ".env" in rules.hidden  # hidden inside writable: it stays hidden


INSIDE_HIDDEN = (
    "Profile 'mine' makes {} writable, but it lies inside the hidden path {}: a kernel cannot "
    "write where it cannot see; remove it from the profile's writable list."
)
HOLDS_HOME = (
    "Profile 'mine' would make {} writable, which {}: a kernel that may write there could "
    "change your shell's start-up files and run code outside its sandbox. Start the kernel in a "
    "project directory, or choose profile 'none'."
)
CWD_HIDDEN = (
    "The kernel's working directory {} lies inside {}, which profile 'mine' hides: start the "
    "kernel in another directory, or choose profile 'none'."
)


@pytest.mark.parametrize(
    ("writable", "hidden", "where", "message"),
    [
        (("~/.ssh/keys",), (), "project", INSIDE_HIDDEN.format("HOME/.ssh/keys", "HOME/.ssh")),
        (("~/.aws",), (), "project", INSIDE_HIDDEN.format("HOME/.aws", "HOME/.aws")),
        (
            ("{cwd}/data",),
            ("{cwd}",),
            "project",
            INSIDE_HIDDEN.format("HOME/project/data", "HOME/project"),
        ),
        (("/srv/shared",), ("/srv",), "project", INSIDE_HIDDEN.format("/srv/shared", "/srv")),
        (("~",), (), "project", HOLDS_HOME.format("HOME", "is your home directory")),
        (("/",), (), "project", HOLDS_HOME.format("/", "holds your home directory")),
        (("{cwd}/..",), (), "project", HOLDS_HOME.format("HOME", "is your home directory")),
        ((), ("{cwd}",), "project", CWD_HIDDEN.format("HOME/project", "HOME/project")),
        ((), ("~",), "project", CWD_HIDDEN.format("HOME/project", "HOME")),
        ((), ("~/.ssh",), "ssh", CWD_HIDDEN.format("HOME/.ssh/inner", "HOME/.ssh")),
        (
            ("data",),
            (),
            "project",
            "Path 'data' is relative: write it as {cwd}/data, ~/data or an absolute path",
        ),
        (
            ("~bob/x",),
            (),
            "project",
            "Path '~bob/x' names another user's home: write ~/… (yours) or an absolute path",
        ),
        (
            ("/x/{cwd}",),
            (),
            "project",
            "Path '/x/{cwd}' uses {cwd} inside it: {cwd} may only begin a path",
        ),
        ((), ("",), "project", "A path is empty"),
        ((), ("/a\x00b",), "project", "Path '/a\\x00b' holds a NUL character"),
    ],
)
def test_rules_that_cannot_hold_are_refused(
    place: tuple[Path, Path],
    writable: tuple[str, ...],
    hidden: tuple[str, ...],
    where: str,
    message: str,
) -> None:
    home, project = place
    cwd = {"project": project, "home": home, "ssh": home / ".ssh" / "inner"}[where]
    profile = replace(WORKSPACE, name="mine", writable=writable, hidden=hidden)
    with pytest.raises(SandboxRulesError) as refused:
        profile.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME)
    assert str(refused.value) == message.replace("HOME", str(home))


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{cwd}", None),
        ("{cwd}/x", None),
        ("~", None),
        ("~/x", None),
        ("/x", None),
        ("", "a path is empty"),
        ("/a\x00b", "path '/a\\x00b' holds a NUL character"),
        ("{cwd}x", "path '{cwd}x' uses {cwd} inside it: {cwd} may only begin a path"),
        ("{cwd}/{cwd}", "path '{cwd}/{cwd}' uses {cwd} inside it: {cwd} may only begin a path"),
        ("~bob", "path '~bob' names another user's home: write ~/… (yours) or an absolute path"),
        ("x", "path 'x' is relative: write it as {cwd}/x, ~/x or an absolute path"),
    ],
)
def test_written_path_problem(text: str, problem: str | None) -> None:
    assert written_path_problem(text) == problem


@pytest.mark.parametrize("where", ["home", "root"])
def test_a_kernel_started_in_the_home_directory_writes_only_its_temp_dir(
    place: tuple[Path, Path], where: str
) -> None:
    home, _ = place
    cwd = {"home": home, "root": Path("/")}[where]
    rules = WORKSPACE.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME)
    assert rules.confined and rules.writable == ()
    extra = replace(WORKSPACE, writable=("{cwd}", "/srv/data"))
    assert extra.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME).writable == (
        Path("/srv/data"),
    )


@pytest.mark.parametrize(
    ("cwd", "home", "private", "message"),
    [
        ("rel", "/home/u", (), "working directory rel is not an absolute"),
        ("/p", "home", (), "home home is not an absolute"),
        ("/p", "/home/u", ("state",), "private path state is not an absolute"),
    ],
)
def test_paths_given_must_be_absolute(
    cwd: str, home: str, private: tuple[str, ...], message: str
) -> None:
    with pytest.raises(SandboxRulesError, match=message):
        WORKSPACE.rules(
            cwd=Path(cwd),
            home=Path(home),
            private=tuple(Path(p) for p in private),
            session_runtime=NO_RUNTIME,
        )


def test_private_dirs_holding_the_cwd_are_refused(place: tuple[Path, Path]) -> None:
    home, cwd = place
    with pytest.raises(SandboxRulesError, match="lies inside"):
        WORKSPACE.rules(cwd=cwd, home=home, private=(cwd.parent,), session_runtime=NO_RUNTIME)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{cwd}", "/work/p"),
        ("{cwd}/", "/work/p"),
        ("{cwd}/a/../b", "/work/p/b"),
        ("~", "/h"),
        ("~/", "/h"),
        ("~/.cache/pip", "/h/.cache/pip"),
        ("/data//x/.", "/data/x"),
        ("/data/../etc", "/etc"),
        # only the slashes after {cwd} or ~ are dropped, not what follows them
        ("{cwd}//X/", "/work/p/X"),
        ("~//X", "/h/X"),
    ],
)
def test_concrete_path(text: str, expected: str) -> None:
    # The paths do not exist, so nothing is resolved beyond normalising.
    assert concrete_path(text, cwd=Path("/work/p"), home=Path("/h")) == Path(expected)


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/a/b", "/a", True),
        ("/a", "/a", True),
        ("/ab", "/a", False),
        ("/a", "/a/b", False),
        ("/x", "/", True),
        ("/", "/", True),
    ],
)
def test_lies_inside(path: str, root: str, inside: bool) -> None:
    assert lies_inside(Path(path), Path(root)) is inside


def test_outermost() -> None:
    paths = [Path(p) for p in ("/b/c", "/a", "/b", "/a/x", "/b", "/bc")]
    assert outermost(paths) == (Path("/a"), Path("/b"), Path("/bc"))


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        # A name that only begins like another ("/a-b", "/ab") is not inside it, and sorts
        # after the paths that are ("/a/b/c").
        (["/a/b", "/a-b", "/a", "/a/b/c", "/ab"], ["/a", "/a-b", "/ab"]),
        (["/x", "/", "/y/z"], ["/"]),
        (["/a/b/c", "/a/b"], ["/a/b"]),
        (["/a/c/d", "/a/b", "/a/c", "/a/bb/x"], ["/a/b", "/a/bb/x", "/a/c"]),
        ([], []),
    ],
)
def test_outermost_keeps_each_path_no_other_holds(paths: list[str], expected: list[str]) -> None:
    assert outermost(Path(p) for p in paths) == tuple(Path(p) for p in expected)


def rules(
    writable: tuple[str, ...] = ("/w",),
    hidden: tuple[str, ...] = ("/h",),
    network: bool = True,
    memory: int | None = 100,
    processes: int | None = 10,
    confined: bool = True,
    protected: tuple[str, ...] = (".envrc", ".vscode"),
    read_only: tuple[str, ...] = ("/w/.venv",),
) -> SandboxRules:
    """Rules written briefly for the strictness table."""
    return SandboxRules(
        "x",
        confined,
        tuple(Path(p) for p in writable),
        tuple(Path(p) for p in hidden),
        parse_network(network),
        memory,
        processes,
        protected=protected,
        read_only=tuple(Path(p) for p in read_only),
    )


UNCONFINED = rules((), (), True, None, None, confined=False)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (rules(), rules(), True),
        (rules(), UNCONFINED, True),
        (UNCONFINED, UNCONFINED, True),
        (UNCONFINED, rules(), False),
        # writable: a's must lie inside b's
        (rules(writable=("/w/sub",)), rules(), True),
        (rules(writable=()), rules(), True),
        (rules(writable=("/w", "/v")), rules(), False),
        (rules(writable=("/",)), rules(), False),
        (rules(), rules(writable=("/w/sub",)), False),
        # hidden: b's must lie inside a's
        (rules(hidden=("/h", "/g")), rules(), True),
        (rules(hidden=("/",)), rules(), True),
        (rules(hidden=("/h/sub",)), rules(), False),
        (rules(hidden=()), rules(), False),
        (rules(), rules(hidden=("/h/sub",)), True),
        # network, memory, processes
        (rules(network=False), rules(), True),
        (rules(), rules(network=False), False),
        (rules(memory=50), rules(), True),
        (rules(memory=101), rules(), False),
        (rules(memory=None), rules(), False),
        (rules(), rules(memory=None), True),
        (rules(memory=None), rules(memory=None), True),
        (rules(processes=9), rules(), True),
        (rules(processes=11), rules(), False),
        (rules(processes=None), rules(), False),
        (rules(), rules(processes=None), True),
        # protected names: b's must all be a's too
        (rules(protected=(".envrc", ".vscode", ".idea")), rules(), True),
        (rules(protected=(".envrc",)), rules(), False),
        (rules(protected=()), rules(), False),
        (rules(), rules(protected=()), True),
        # read-only paths: each of b's that a may write in is read-only in a too
        (rules(read_only=("/w",)), rules(), True),
        (rules(read_only=()), rules(), False),
        (rules(read_only=("/w/.venv/lib",)), rules(), False),
        (rules(writable=("/w/src",), read_only=()), rules(), True),  # a writes no venv
        (rules(), rules(read_only=()), True),
    ],
)
def test_at_least_as_strict(a: SandboxRules, b: SandboxRules, expected: bool) -> None:
    assert at_least_as_strict(a, b) is expected


def test_the_built_ins_by_strictness(place: tuple[Path, Path]) -> None:
    home, cwd = place

    def concrete(profile: SandboxProfile) -> SandboxRules:
        return profile.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME)

    none, workspace, strict = concrete(NONE), concrete(WORKSPACE), concrete(STRICT)
    assert at_least_as_strict(strict, workspace) and at_least_as_strict(workspace, none)
    assert not at_least_as_strict(workspace, strict) and not at_least_as_strict(none, workspace)
    # Named "strict" but looser in one rule: the rules decide, not the name.
    loose = concrete(replace(STRICT, writable=("{cwd}", "/srv")))
    assert not at_least_as_strict(loose, workspace)


def test_the_new_credential_files_are_always_hidden(place: tuple[Path, Path]) -> None:
    home, cwd = place
    hidden = WORKSPACE.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME).hidden
    for written in (
        "~/.npmrc",
        "~/.yarnrc.yml",
        "~/.cargo/credentials",
        "~/.cargo/credentials.toml",
        "~/.gem/credentials",
        "~/.m2/settings.xml",
        "~/.gradle/gradle.properties",
        "~/.pgpass",
        "~/.my.cnf",
        "~/.vault-token",
        "~/.terraform.d/credentials.tfrc.json",
        "~/.cache/huggingface/token",
        "~/.huggingface/token",
        "~/.config/rclone/rclone.conf",
        "~/.s3cfg",
        "~/.boto",
        "~/.bash_history",
        "~/.zsh_history",
        "~/.python_history",
        "~/.psql_history",
        "~/.local/share/fish/fish_history",
    ):
        assert written in ALWAYS_HIDDEN
        assert home / written[2:] in hidden


@pytest.mark.parametrize(
    ("protected", "unprotected", "names"),
    [
        ((), (), DEFAULT_PROTECTED),
        ((".github/workflows/",), (), (*DEFAULT_PROTECTED, ".github/workflows")),
        (
            (),
            (".idea", ".envrc/"),
            tuple(n for n in DEFAULT_PROTECTED if n not in (".idea", ".envrc")),
        ),
        (
            (".envrc", ".git"),
            (".envrc",),
            (*DEFAULT_PROTECTED[:6], *DEFAULT_PROTECTED[7:], ".envrc", ".git"),
        ),
    ],
)
def test_a_profile_adds_and_takes_out_protected_names(
    protected: tuple[str, ...], unprotected: tuple[str, ...], names: tuple[str, ...]
) -> None:
    profile = replace(WORKSPACE, protected=protected, unprotected=unprotected)
    assert profile.protected_names() == names


def test_rules_carry_the_protected_names(place: tuple[Path, Path]) -> None:
    home, cwd = place
    profile = replace(WORKSPACE, unprotected=(".idea",), protected=("notes.md",))
    made = profile.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME)
    assert made.protected == profile.protected_names()
    assert "notes.md" in made.protected and ".idea" not in made.protected


@pytest.mark.parametrize("link", [".vscode", ".git", "notes"])
def test_a_symlink_where_a_name_is_protected_is_refused(
    place: tuple[Path, Path], tmp_path: Path, link: str
) -> None:
    home, cwd = place
    (tmp_path / "elsewhere").mkdir()
    (cwd / link).symlink_to(tmp_path / "elsewhere")
    profile = replace(WORKSPACE, protected=("notes/today.md",))
    with pytest.raises(SandboxRulesError, match=rf"^{cwd / link} is a symbolic link"):
        profile.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME)
    # taken out by the person, the link is no longer the sandbox's to keep
    if link == ".vscode":
        taken_out = replace(profile, unprotected=(".vscode",))
        assert taken_out.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME).writable == (cwd,)


def test_what_loomgate_runs_from_stays_read_only(place: tuple[Path, Path], tmp_path: Path) -> None:
    home, cwd = place
    venv, clone = cwd / ".venv", tmp_path / "clone"
    made = WORKSPACE.rules(
        cwd=cwd, home=home, session_runtime=NO_RUNTIME, environment=(venv, clone, Path("/usr"))
    )
    assert made.writable == (cwd,) and made.read_only == (venv,)  # only those it could write
    # started inside it (the README's first command runs in the clone): only its /tmp
    inside = WORKSPACE.rules(
        cwd=clone / "docs", home=home, session_runtime=NO_RUNTIME, environment=(clone,)
    )
    assert inside.writable == () and inside.read_only == ()
    with pytest.raises(SandboxRulesError, match="environment path rel is not an absolute"):
        WORKSPACE.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME, environment=(Path("rel"),))


def test_the_refusal_of_a_symlinked_name_names_the_profile(
    place: tuple[Path, Path], tmp_path: Path
) -> None:
    """(The test above reads its start only; a mutant of profiles.py lived without this.)"""
    home, cwd = place
    (tmp_path / "elsewhere").mkdir()
    (cwd / ".vscode").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SandboxRulesError, match="which the sandbox of profile 'workspace' cannot"):
        WORKSPACE.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME)


def test_readable_paths_are_made_concrete_in_the_home_dir(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "project"
    cwd.mkdir()
    profile = replace(WORKSPACE, readable=("~/.newtool", "~/a/b"))
    rules = profile.rules(cwd=cwd, home=home, session_runtime=())
    assert rules.readable == (home / ".newtool", home / "a/b")
    assert WORKSPACE.rules(cwd=cwd, home=home, session_runtime=()).readable == ()


@pytest.mark.parametrize(
    ("mine", "theirs", "stricter"),
    [
        ((), (), True),
        ((), ("~/x",), True),
        (("~/x",), (), False),  # it shows more of the home dir
        (("~/x/y",), ("~/x",), True),  # inside one the other shows
        (("~/x",), ("~/x/y",), False),
        (("~/x", "~/z"), ("~/x",), False),
    ],
)
def test_a_profile_that_shows_more_of_the_home_dir_is_looser(
    tmp_path: Path, mine: tuple[str, ...], theirs: tuple[str, ...], stricter: bool
) -> None:
    home, cwd = tmp_path / "home", tmp_path / "project"
    cwd.mkdir()
    a = replace(WORKSPACE, readable=mine).rules(cwd=cwd, home=home, session_runtime=())
    b = replace(WORKSPACE, readable=theirs).rules(cwd=cwd, home=home, session_runtime=())
    assert at_least_as_strict(a, b) is stricter
