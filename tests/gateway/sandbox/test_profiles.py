"""Sandbox profiles: built-ins, rules made concrete for a kernel, strictness, sizes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.profiles import (
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
    assert (NONE.confined, NONE.writable, NONE.network, NONE.memory) == (False, (), True, None)
    assert WORKSPACE.confined and WORKSPACE.writable == ("{cwd}",) and WORKSPACE.network
    assert (WORKSPACE.memory, WORKSPACE.processes) == (DEFAULT_MEMORY, DEFAULT_PROCESSES)
    assert replace(WORKSPACE, name="strict", network=False) == STRICT


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


def test_none_is_not_confined(place: tuple[Path, Path]) -> None:
    home, cwd = place
    assert NONE.rules(cwd=cwd, home=home, private=(home / "state",)) == SandboxRules(
        "none", False, (), (), True, None, None
    )


def test_workspace_rules(place: tuple[Path, Path], tmp_path: Path) -> None:
    home, cwd = place
    state = tmp_path / "state"
    runtime = tmp_path / "runtime"
    rules = WORKSPACE.rules(cwd=cwd, home=home, private=(state,), session_runtime=(runtime,))
    assert rules.profile == "workspace" and rules.confined and rules.network
    assert rules.writable == (cwd,)
    for written in ("~/.ssh", "~/.aws", "~/.netrc", "~/.config/gh", "~/Library/Keychains"):
        assert home / written[2:] in rules.hidden
    assert {state.resolve(), runtime.resolve(), Path("/run/dbus")} <= set(rules.hidden)
    assert all(p.is_absolute() for p in rules.hidden)
    assert list(rules.hidden) == sorted(set(rules.hidden))
    assert (rules.memory, rules.processes) == (DEFAULT_MEMORY, DEFAULT_PROCESSES)
    assert STRICT.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME).network is False


def test_every_always_hidden_path_is_well_formed() -> None:
    assert all(written_path_problem(p) is None for p in ALWAYS_HIDDEN)
    assert all(p.startswith(("~/", "/")) for p in ALWAYS_HIDDEN)
    assert len(set(ALWAYS_HIDDEN)) == len(ALWAYS_HIDDEN)


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


@pytest.mark.parametrize(
    ("writable", "hidden", "where", "message"),
    [
        (("~/.ssh/keys",), (), "project", "lies inside the hidden path"),
        (("~/.aws",), (), "project", "lies inside the hidden path"),
        (("{cwd}/data",), ("{cwd}",), "project", "lies inside the hidden path"),
        (("/srv/shared",), ("/srv",), "project", "lies inside the hidden path"),
        (("~",), (), "project", "is your home directory"),
        (("/",), (), "project", "holds your home directory"),
        (("{cwd}/..",), (), "project", "is your home directory"),
        ((), ("{cwd}",), "project", "The kernel's working directory"),
        ((), ("~",), "project", "The kernel's working directory"),
        ((), ("~/.ssh",), "ssh", "The kernel's working directory"),
        (("data",), (), "project", "is relative: write it as {cwd}/data"),
        (("~bob/x",), (), "project", "names another user's home"),
        (("/x/{cwd}",), (), "project", "{cwd} may only begin a path"),
        ((), ("",), "project", "A path is empty"),
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
    with pytest.raises(SandboxRulesError, match=r"^[A-Z]") as refused:
        profile.rules(cwd=cwd, home=home, session_runtime=NO_RUNTIME)
    assert message in str(refused.value)


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


def rules(
    writable: tuple[str, ...] = ("/w",),
    hidden: tuple[str, ...] = ("/h",),
    network: bool = True,
    memory: int | None = 100,
    processes: int | None = 10,
    confined: bool = True,
) -> SandboxRules:
    """Rules written briefly for the strictness table."""
    return SandboxRules(
        "x",
        confined,
        tuple(Path(p) for p in writable),
        tuple(Path(p) for p in hidden),
        network,
        memory,
        processes,
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
