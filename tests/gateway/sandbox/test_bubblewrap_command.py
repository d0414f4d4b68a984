"""The bwrap argv for a kernel's rules, read whole (bwrap's later mounts lie over earlier ones,
so its order is the policy), its path helpers, and the kernel's own host dir; no process runs."""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import bubblewrap, placeholders
from loomgate.gateway.sandbox.confinement.bubblewrap_confiner import BubblewrapConfiner
from loomgate.gateway.sandbox.confinement.launch import SandboxLaunch
from loomgate.gateway.sandbox.confinement.limits import KernelLimits
from loomgate.gateway.sandbox.network import kernel_network
from loomgate.gateway.sandbox.policy.home_view import home_view, xdg_dirs
from tests.gateway.sandbox import sandboxes

BWRAP = "/usr/bin/bwrap"
CMD = ["python", "-c", "pass"]
START = [BWRAP, *bubblewrap.ISOLATION]
# The root, read-only, with its own /dev and /proc (/proc's writable files made read-only).
ROOT = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
ROOT += [w for p in bubblewrap.PROC_READ_ONLY if p.exists() for w in ("--ro-bind", str(p), str(p))]
ROOT += ["--perms", "1777", "--tmpfs", "/tmp"]


@pytest.fixture(autouse=True)
def no_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home dir that does not exist: these tables leave out its view (test_home_view.py)."""
    monkeypatch.setenv("HOME", str(tmp_path / "no-home"))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A git project with a hidden .env, a state dir holding the kernel's dir, a runtime dir
    holding its connection file and another's, and a symlink there to a state file."""
    for directory in ("project/.git/hooks", "state/kernels/k1", "runtime", "home/.ssh"):
        (tmp_path / directory).mkdir(parents=True)
    for file in (
        "project/.env",
        "project/.git/config",
        "state/token",
        "runtime/kernel-own.json",
        "runtime/other.json",
    ):
        (tmp_path / file).write_text("x")
    (tmp_path / "runtime/link-to-token").symlink_to(tmp_path / "state/token")
    bubblewrap.prepare_kernel_dir(tmp_path / "state/kernels/k1")
    return tmp_path


def argv(
    tree: Path,
    *,
    network: bool | str = "host",  # the mounts alone (the network's own: below)
    writable: list[Path] | None = None,
    hidden: list[Path] | None = None,
    kernel_dir: str = "state/kernels/k1",
    connection: str | None = "runtime/kernel-own.json",
    unset_env: tuple[str, ...] = ("JPY_PARENT_PID", "TOKEN", "JPY_PARENT_PID"),
    protected: tuple[str, ...] = (".envrc",),
    read_only: tuple[Path, ...] = (),
    cmd: list[str] = CMD,
) -> list[str]:
    """Return the command for `tree`'s kernel under rules with these paths (protecting only
    `protected` of the names, to keep the tables short)."""
    rules = sandboxes.rules(
        writable=[tree / "project"] if writable is None else writable,
        hidden=[tree / "project/.env", tree / "state", tree / "runtime"]
        if hidden is None
        else hidden,
        network=network,
    )
    rules = replace(rules, protected=protected, read_only=read_only)
    return bubblewrap.command(
        rules,
        cmd,
        bwrap=BWRAP,
        cwd=tree / "project",
        kernel_dir=tree / kernel_dir,
        connection_file=tree / connection if connection is not None else None,
        unset_env=unset_env,
    )


# The project's .git, read-only as a whole, with no protected name but .git.
GIT_GUARD = ["--ro-bind T/project/.git T/project/.git"]


def words(tree: Path, *pairs: str) -> list[str]:
    """Return `pairs` split into words, with T standing for `tree`."""
    return [word.replace("T/", f"{tree}/") for pair in pairs for word in pair.split()]


def test_the_whole_command_in_order(tree: Path) -> None:
    empty = "T/state/kernels/k1/hidden"
    assert argv(tree, network=False) == [
        *START,
        "--unshare-net",
        *ROOT,
        *words(
            tree,
            "--bind T/project T/project",
            # a protected name, read-only before it exists (its placeholder was made for it)
            "--ro-bind T/project/.envrc T/project/.envrc",
            # .git a mount point (it cannot be renamed or replaced), read-only as a whole
            "--ro-bind T/project/.git T/project/.git",
            # hidden after writable: a hidden file in a writable dir stays hidden
            f"--ro-bind {empty} T/project/.env",
            # dirs on the way to the kernel's own files: enterable, what they hold hidden
            "--perms 0111 --tmpfs T/state",
            "--perms 0111 --tmpfs T/state/kernels",
            f"--ro-bind {empty} T/state/kernels/.placeholders-k1.json",  # what it made
            f"--ro-bind {empty} T/state/kernels/.placeholders.lock",
            "--perms 0111 --tmpfs T/state/kernels/k1",
            f"--ro-bind {empty} T/state/kernels/k1/hidden",
            f"--ro-bind {empty} T/state/token",
            "--perms 0111 --tmpfs T/runtime",
            f"--ro-bind {empty} T/runtime/other.json",  # the symlink is simply not there
            # the kernel's own: after the hiding, then what bwrap mounted on made read-only
            "--bind T/state/kernels/k1/ipc T/state/kernels/k1/ipc",
            "--bind T/state/kernels/k1/packages T/state/kernels/k1/packages",
            "--bind T/state/kernels/k1/homes T/state/kernels/k1/homes",
            "--ro-bind T/runtime/kernel-own.json T/runtime/kernel-own.json",
            "--remount-ro T/state",
            "--remount-ro T/state/kernels",
            "--remount-ro T/state/kernels/k1",
            "--remount-ro T/runtime",
            "--setenv TMPDIR /tmp --setenv IPYTHONDIR /tmp/ipython",
            "--unsetenv JPY_PARENT_PID",
            "--unsetenv TOKEN",
            "--chdir T/project",
        ),
        "--",
        *CMD,
    ]


def test_a_kernel_dir_outside_the_hidden_paths_is_hidden_but_its_own_dirs(tree: Path) -> None:
    bubblewrap.prepare_kernel_dir(tree / "k")
    bubblewrap.info_file(tree / "k").write_text("{}")
    command = argv(
        tree,
        writable=[],
        hidden=[tree / "home/.ssh", tree / "project/.env"],
        kernel_dir="k",
        connection=None,
        unset_env=(),
    )
    assert command == [
        *START,
        *ROOT,
        *words(
            tree,
            "--perms 0000 --tmpfs T/home/.ssh",  # no way through: neither listed nor entered
            "--ro-bind T/k/hidden T/project/.env",
            "--perms 0111 --tmpfs T/k",
            "--ro-bind T/k/hidden T/k/bwrap-info.json",  # the pid the gateway signals
            "--ro-bind T/k/hidden T/k/hidden",
            "--bind T/k/ipc T/k/ipc",
            "--bind T/k/packages T/k/packages",
            "--bind T/k/homes T/k/homes",
            "--remount-ro T/home/.ssh",
            "--remount-ro T/k",
            "--setenv TMPDIR /tmp --setenv IPYTHONDIR /tmp/ipython",
            "--chdir T/project",
        ),
        "--",
        *CMD,
    ]


def test_paths_are_bound_where_they_really_are(tree: Path) -> None:
    (tree / "link-to-project").symlink_to(tree / "project")
    (tree / "link-to-ssh").symlink_to(tree / "home/.ssh")
    (tree / "link-to-kernel").symlink_to(tree / "state/kernels/k1")
    command = argv(
        tree,
        writable=[tree / "link-to-project"],
        hidden=[tree / "link-to-ssh"],
        kernel_dir="link-to-kernel",
        connection=None,
        protected=(),
    )
    assert command[len(START) + len(ROOT) : -len(CMD) - 1] == words(
        tree,
        "--bind T/project T/project",
        *GIT_GUARD,
        "--perms 0000 --tmpfs T/home/.ssh",
        "--perms 0111 --tmpfs T/state/kernels/k1",
        "--ro-bind T/link-to-kernel/hidden T/state/kernels/k1/hidden",
        "--bind T/state/kernels/k1/ipc T/state/kernels/k1/ipc",
        "--bind T/state/kernels/k1/packages T/state/kernels/k1/packages",
        "--bind T/state/kernels/k1/homes T/state/kernels/k1/homes",
        "--remount-ro T/home/.ssh",
        "--remount-ro T/state/kernels/k1",
        "--setenv TMPDIR /tmp --setenv IPYTHONDIR /tmp/ipython",
        "--unsetenv JPY_PARENT_PID",
        "--unsetenv TOKEN",
        "--chdir T/project",
    )


def test_missing_and_nested_paths_are_left_out(tree: Path) -> None:
    missing = tree / "nowhere"
    command = argv(
        tree,
        writable=[tree / "project", missing, tree / "project", tree / "home"],
        hidden=[missing / "x", tree / "home", tree / "home/.ssh", tree / "home/.ssh"],
        connection=None,
        protected=(),
    )
    assert command[len(START) + len(ROOT) : -len(CMD) - 1] == words(
        tree,
        "--bind T/project T/project",
        "--bind T/home T/home",
        # no .git there: a placeholder keeps one from being made
        "--ro-bind T/home/.git T/home/.git",
        *GIT_GUARD,
        "--perms 0000 --tmpfs T/home",  # hidden though writable, and .ssh with it
        "--perms 0111 --tmpfs T/state/kernels/k1",
        "--ro-bind T/state/kernels/k1/hidden T/state/kernels/k1/hidden",
        "--bind T/state/kernels/k1/ipc T/state/kernels/k1/ipc",
        "--bind T/state/kernels/k1/packages T/state/kernels/k1/packages",
        "--bind T/state/kernels/k1/homes T/state/kernels/k1/homes",
        "--remount-ro T/home",
        "--remount-ro T/state/kernels/k1",
        "--setenv TMPDIR /tmp --setenv IPYTHONDIR /tmp/ipython",
        "--unsetenv JPY_PARENT_PID",
        "--unsetenv TOKEN",
        "--chdir T/project",
    )


@pytest.mark.parametrize(
    ("confined", "cmd", "prepared", "message"),
    [
        (False, CMD, True, "^profile 'test' is not confined: run its kernel as it is$"),
        (True, [], True, "^the kernel command is empty: give the argv the sandbox should run$"),
        (True, CMD, False, r"^\S+/k/hidden is missing: call prepare_kernel_dir\('\S+/k'\) first$"),
    ],
)
def test_bad_input_is_refused(
    tmp_path: Path, confined: bool, cmd: list[str], prepared: bool, message: str
) -> None:
    if prepared:
        bubblewrap.prepare_kernel_dir(tmp_path / "k")
    rules = sandboxes.rules()
    rules = type(rules)(**{**vars(rules), "confined": confined})
    with pytest.raises(ValueError, match=message):
        bubblewrap.command(
            rules, cmd, bwrap=BWRAP, cwd=tmp_path, kernel_dir=tmp_path / "k", connection_file=None
        )


def test_the_kernel_dir_is_private(tmp_path: Path) -> None:
    kernel_dir = tmp_path / "a" / "k"
    bubblewrap.prepare_kernel_dir(kernel_dir)
    assert stat.S_IMODE(kernel_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(bubblewrap.ipc_dir(kernel_dir).stat().st_mode) == 0o700
    assert bubblewrap.empty_file(kernel_dir).stat().st_size == 0
    assert stat.S_IMODE(bubblewrap.empty_file(kernel_dir).stat().st_mode) == 0


def test_the_kernel_dir_is_made_private_again_but_for_the_last_pid(tmp_path: Path) -> None:
    kernel_dir = tmp_path / "k"
    kernel_dir.mkdir(mode=0o755)
    kernel_dir.chmod(0o755)
    bubblewrap.empty_file(kernel_dir).write_text("")
    bubblewrap.empty_file(kernel_dir).chmod(0o644)
    bubblewrap.info_file(kernel_dir).write_text('{"child-pid": 1234}')
    (kernel_dir / "kept").write_text("x")
    bubblewrap.ipc_dir(kernel_dir).mkdir()
    bubblewrap.prepare_kernel_dir(kernel_dir)
    assert not bubblewrap.info_file(kernel_dir).exists()
    assert (kernel_dir / "kept").read_text() == "x"
    assert stat.S_IMODE(kernel_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(bubblewrap.empty_file(kernel_dir).stat().st_mode) == 0
    assert bubblewrap.ipc_dir(kernel_dir).is_dir()


def test_the_kernel_dirs_files() -> None:
    kernel_dir = Path("/s/k")
    assert bubblewrap.empty_file(kernel_dir) == Path("/s/k/hidden")
    assert bubblewrap.info_file(kernel_dir) == Path("/s/k/bwrap-info.json")
    assert bubblewrap.ipc_dir(kernel_dir) == Path("/s/k/ipc")


@pytest.mark.parametrize(
    ("path", "top", "inside"),
    [
        ("/a/b", "/a/b", True),
        ("/a/b/c", "/a/b", True),
        ("/a/bc", "/a/b", False),
        ("/a", "/a/b", False),
        ("/x/b", "/a/b", False),
    ],
)
def test_within(path: str, top: str, inside: bool) -> None:
    assert bubblewrap.within(Path(path), Path(top)) is inside


@pytest.mark.parametrize(
    ("paths", "kept"),
    [
        (["/a", "/a/b", "/c"], ["/a", "/c"]),
        (["/a/b", "/a"], ["/a"]),
        (["/a/b", "/a/bc", "/a/b/c/d"], ["/a/b", "/a/bc"]),
        (["/a"], ["/a"]),
        ([], []),
    ],
)
def test_outermost(paths: list[str], kept: list[str]) -> None:
    assert bubblewrap.outermost([Path(p) for p in paths]) == [Path(p) for p in kept]


def test_existing_paths_are_real_once_each_in_order(tmp_path: Path) -> None:
    for name in ("b", "a"):
        (tmp_path / name).mkdir()
    (tmp_path / "to-a").symlink_to(tmp_path / "a")
    (tmp_path / "dangling").symlink_to(tmp_path / "none")
    given = ["b", "to-a", "none", "a", "dangling", "b/../a"]
    found = bubblewrap.existing(tmp_path / name for name in given)
    assert found == [tmp_path / "b", tmp_path / "a"]
    assert bubblewrap.real(tmp_path / "to-a" / "x") == tmp_path / "a" / "x"


def unused_pid() -> int:
    """Return a pid no process can have (above the kernel's pid_max)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_signalling_a_sandbox_that_is_gone_says_so() -> None:
    # Reaching a live sandbox: test_bubblewrap.py (these would signal the test's own process).
    confiner = BubblewrapConfiner("bwrap")
    for signum in (signal.SIGINT, signal.SIGKILL):
        with pytest.raises(ProcessLookupError):
            confiner.signal_init(unused_pid(), signum)


def lay_out(top: Path, layout: str) -> None:
    """Make the layout named `layout` in the writable dir `top` (and `top/../main`)."""
    main_git = top.parent / "main" / ".git"
    if layout in ("git dir", "whole git"):
        (top / ".git").mkdir()
    if layout in ("worktree", "worktree elsewhere"):
        (main_git / "worktrees" / "w").mkdir(parents=True)
        (top / ".git").write_text("gitdir: ../main/.git/worktrees/w\n")
    if layout == "nested name":
        (top / ".github" / "workflows").mkdir(parents=True)
    if layout == "host code":
        for name in ("main.py", "env/pyvenv.cfg", "env/lib/x.py", "node_modules/a/b.js"):
            (top / name).parent.mkdir(parents=True, exist_ok=True)
            (top / name).write_text("")
        for name in ("pkg/__pycache__/m.cpython-311.pyc", "pkg/m.py", "pkg/sub/n.py"):
            (top / name).parent.mkdir(parents=True, exist_ok=True)
            (top / name).write_text("")


Guard = tuple[str, str | None]
WORKTREE = "../main/.git/worktrees/w"
GUARD_CASES: list[tuple[str, tuple[str, ...], list[Guard]]] = [
    # a writable dir without .git cannot get one: its placeholder is mounted read-only
    ("no git", (".envrc",), [(".git", "dir"), (".envrc", "dir")]),
    # .git is a mount point, read-only as a whole: no commit from inside
    ("git dir", (".envrc",), [(".git", "dir"), (".envrc", "dir")]),
    # a .git file cannot be re-pointed; the gitdir it names is guarded where it is writable
    ("worktree", (), [(".git", None), (WORKTREE, None)]),
    ("worktree elsewhere", (), [(".git", None)]),
    ("whole git", (".git",), [(".git", "dir")]),
    # a nested name gets its placeholder at its first missing part
    ("no nested name", (".github/workflows",), [(".git", "dir"), (".github", "dir")]),
    ("nested name", (".github/workflows",), [(".git", "dir"), (".github/workflows", "dir")]),
    # what the person's tools run later: a venv (any name), node_modules, bytecode caches (a
    # cache found is made again if it is gone when the sandbox starts: another kernel's
    # placeholder, removed as that kernel ended), and a cache made where there is Python source
    # without one
    (
        "host code",
        (),
        [
            (".git", "dir"),
            ("node_modules", None),
            ("env", None),
            ("pkg/__pycache__", "dir"),
            ("__pycache__", "dir"),
            ("pkg/sub/__pycache__", "dir"),
        ],
    ),
]


@pytest.mark.parametrize(
    ("layout", "names", "expected"), GUARD_CASES, ids=[c[0] for c in GUARD_CASES]
)
def test_what_stays_read_only_in_a_writable_dir(
    tmp_path: Path, layout: str, names: tuple[str, ...], expected: list[Guard]
) -> None:
    top = tmp_path / "w"
    top.mkdir()
    lay_out(top, layout)
    writable = [top] if layout == "worktree elsewhere" else [top, tmp_path / "main"]
    found = bubblewrap.guarded(top, names, writable)
    assert [(os.path.relpath(p, top), k) for p, k in found] == expected


def test_placeholders_are_made_before_the_mounts_and_recorded(tree: Path) -> None:
    project = tree / "project"
    (project / "app.py").write_text("")
    command = argv(tree, protected=(".envrc", ".github/workflows"))
    for name in (".envrc", ".github", "__pycache__"):
        assert (project / name).is_dir(), name
        assert f"{project / name}" in command
    record = json.loads(placeholders.record_file(tree / "state/kernels/k1").read_text())
    assert set(record["created"]) == {
        str(project / name) for name in (".envrc", ".github", "__pycache__")
    }
    assert placeholders.remove(tree / "state/kernels/k1")
    assert sorted(p.name for p in project.iterdir()) == [".env", ".git", "app.py"]
    assert sorted(p.name for p in (project / ".git").iterdir()) == ["config", "hooks"]


@pytest.mark.parametrize("name", [".vscode", ".git", ".github/workflows"])
def test_a_protected_name_that_is_a_symlink_is_refused(tree: Path, name: str) -> None:
    project = tree / "project"
    if name == ".git":
        (tree / "project/.git").rename(tree / "elsewhere")
    link = project / name.split("/")[0]
    link.symlink_to(tree / "elsewhere")
    remedy = (
        ""
        if name == ".git"
        else rf'take the name out of a profile \(unprotected = \["{name}"\]\), '
    )
    with pytest.raises(
        ValueError,
        match=rf"^{link} is a symbolic link, .*: replace the link with what it points to, "
        rf"{remedy}or choose profile 'none'\.$",
    ):
        argv(tree, protected=(".vscode", ".github/workflows"))
    assert not (project / ".envrc").exists()  # refused before anything was made


def fake_python(prefix: Path, home: Path | None = None) -> Path:
    """Make `prefix/bin/python` (a venv of the base interpreter in `home` when given)."""
    (prefix / "bin").mkdir(parents=True)
    python = prefix / "bin" / "python"
    if home is None:
        python.write_text("")
    else:
        python.symlink_to(home / "bin" / "python")
        (prefix / "pyvenv.cfg").write_text(f"home = {home / 'bin'}\nversion = 3.11.7\n")
    return python


def after_tmp(command: list[str]) -> list[str]:
    """Return the mounts between the sandbox's /tmp and the writable dirs' first bind."""
    start = len(START) + len(ROOT)
    return command[start : command.index("--bind", start)]


def test_an_interpreter_under_the_hosts_tmp_stays_visible(tree: Path) -> None:
    assert tree.is_relative_to("/tmp"), "the tree must lie under the host's /tmp"
    base = tree / "python-base"
    fake_python(base)
    venv = fake_python(tree / "envs" / "venv", home=base)
    command = argv(tree, cmd=[str(venv), "-c", "pass"], protected=())
    # the venv and the base interpreter it names (pyvenv.cfg's home), read-only, in /tmp
    assert after_tmp(command) == words(
        tree, "--ro-bind T/envs/venv T/envs/venv", "--ro-bind T/python-base T/python-base"
    )


def test_the_environment_is_read_only_inside_a_writable_dir(tree: Path) -> None:
    project = tree / "project"
    venv = fake_python(project / ".venv", home=Path("/usr"))
    (project / "src").mkdir()
    command = argv(
        tree,
        writable=[project, tree / "runtime/../home"],
        read_only=(project / "src", tree / "home"),
        cmd=[str(venv.relative_to(project)), "-c", "pass"],  # found from the kernel's cwd
        protected=(),
    )
    assert after_tmp(command) == []  # inside a writable dir: made visible by it
    guarded_end = command.index(f"{project}/.git") + 2  # source, target
    hidden_start = command.index(f"{project}/.env") - 2  # the first hidden path
    # The venv is read-only as any venv in a writable dir is, and as the kernel's environment.
    assert command[guarded_end:hidden_start] == words(
        tree,
        "--ro-bind T/project/.venv T/project/.venv",
        "--ro-bind T/project/.venv T/project/.venv",
        "--ro-bind T/project/src T/project/src",
    )
    assert f"{tree}/home" not in command  # writable, but inside what loomgate runs from


def test_the_kernels_placeholders_are_recorded_beside_its_own_dir() -> None:
    assert placeholders.record_file(Path("/s/k")) == Path("/s/.placeholders-k.json")


@pytest.mark.parametrize(
    ("network", "own_namespace", "proxied"),
    [
        (True, True, True),  # every public address, through the proxy
        (["pypi.org", "127.0.0.1:8080"], True, True),
        (False, True, False),  # nothing at all
        ("host", False, False),  # the person's way back to the host's network
    ],
    ids=["public", "list", "none", "host"],
)
def test_a_kernel_reaches_the_network_only_through_its_proxy(
    tree: Path, network: bool | str | list[str], own_namespace: bool, proxied: bool
) -> None:
    kernel_dir = tree / "state/kernels/k1"
    kernel_network.net_dir(kernel_dir).mkdir()
    command = argv(tree, network=network)
    assert ("--unshare-net" in command) is own_namespace
    net = str(kernel_network.net_dir(kernel_dir))
    triples = set(zip(command, command[1:], command[2:], strict=False))
    assert (("--ro-bind", net, net) in triples) is proxied  # the proxy's socket, not writable
    set_to = {
        command[i + 1]: command[i + 2] for i, word in enumerate(command) if word == "--setenv"
    }
    unset = {command[i + 1] for i, word in enumerate(command) if word == "--unsetenv"}
    kernel = command[command.index("--") + 1 :]
    if not proxied:
        assert "HTTP_PROXY" not in set_to and "NO_PROXY" not in unset
        assert kernel == CMD
        return
    bridge = "http://127.0.0.1:3128"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        assert set_to[name] == bridge
    assert {"NO_PROXY", "no_proxy"} <= unset
    # The bridge from the kernel's loopback to its proxy's socket starts first, in the background.
    socket = str(kernel_network.proxy_socket(kernel_dir))
    assert kernel[:4] == ["/bin/sh", "-c", kernel_network.SCRIPT, kernel_network.NAME]
    script = kernel_network.bridge_script(kernel_dir)
    assert kernel[4:8] == [sys.executable, script, socket, "3128"]
    # run from the kernel's own copy, in the dir bound into its sandbox
    assert script == f"{net}/bridge.py" and Path(script).is_file()
    assert kernel[8:] == CMD


@pytest.mark.parametrize(
    ("bwrap_said", "command_said"),
    [(0, 0), (1, 1), (128, 128), (137, -9), (143, -15), (130, -2), (None, None), (255, 255)],
)
def test_bwraps_status_is_its_commands(bwrap_said: int | None, command_said: int | None) -> None:
    # A kernel SIGKILLed inside reads "killed by SIGKILL", as an unconfined one does.
    assert bubblewrap.command_status(bwrap_said) == command_said


# What the tests above leave open (each fails on a mutant of bubblewrap.py that
# bench/mutation.py found alive without it).
@pytest.mark.parametrize(
    ("bwrap_said", "command_said"),
    [(129, -1), (192, -64), (193, 193)],  # the first and last signal, and past them
)
def test_bwraps_status_at_the_edges_of_the_signals(bwrap_said: int, command_said: int) -> None:
    assert bubblewrap.command_status(bwrap_said) == command_said


def test_the_kernel_dirs_packages_dir_is_private_and_kept(tmp_path: Path) -> None:
    kernel_dir = tmp_path / "k"
    bubblewrap.prepare_kernel_dir(kernel_dir)
    (bubblewrap.packages_dir(kernel_dir) / "mod.py").write_text("")
    bubblewrap.prepare_kernel_dir(kernel_dir)  # a restart
    assert stat.S_IMODE(bubblewrap.packages_dir(kernel_dir).stat().st_mode) == 0o700
    assert (bubblewrap.packages_dir(kernel_dir) / "mod.py").exists()


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (b"gitdir: ../main/.git/worktrees/w\n", "main/.git/worktrees/w"),
        (b"gitdir: ../wt:1\n", "wt:1"),  # a ":" in the path
        (b"gitdir: ../missing\n", None),
        (b"gitdir:   \n", None),
        (b"notgitdir: ../main/.git/worktrees/w\n", None),
        (b"gitdir: ../\xff\n", None),  # not UTF-8: names no dir, and no error
    ],
)
def test_the_gitdir_a_git_file_names(tmp_path: Path, text: bytes, found: str | None) -> None:
    (tmp_path / "main/.git/worktrees/w").mkdir(parents=True)
    (tmp_path / "wt:1").mkdir()
    (tmp_path / "w").mkdir()
    (tmp_path / "w/.git").write_bytes(text)
    expected = tmp_path / found if found is not None else None
    assert bubblewrap.gitdir_of(tmp_path / "w/.git") == expected


def test_a_profile_protecting_git_keeps_a_worktrees_gitdir_read_only_whole(
    tmp_path: Path,
) -> None:
    top = tmp_path / "w"
    top.mkdir()
    lay_out(top, "worktree")
    found = bubblewrap.guarded(top, (".git", ".envrc"), [top, tmp_path / "main"])
    assert [(os.path.relpath(p, top), k) for p, k in found] == [
        (".git", None),
        (WORKTREE, None),
        (".envrc", "dir"),  # the names after .git are still guarded
    ]


def test_a_worktree_of_another_writable_dir_is_read_only_with_its_gitdir(tree: Path) -> None:
    main, project = tree / "main", tree / "project"
    (main / ".git/worktrees/w").mkdir(parents=True)
    (project / ".git/config").unlink()
    (project / ".git/hooks").rmdir()
    (project / ".git").rmdir()
    (project / ".git").write_text("gitdir: ../main/.git/worktrees/w\n")
    command = argv(tree, writable=[project, main])
    gitdir = str(main / ".git/worktrees/w")
    triples = set(zip(command, command[1:], command[2:], strict=False))
    # Read-only within the main repository's .git, read-only as a whole: no commit from the
    # worktree either.
    main_git = str(main / ".git")
    assert ("--ro-bind", main_git, main_git) in triples
    assert ("--bind", gitdir, gitdir) not in triples
    assert ("--ro-bind", str(project / ".git"), str(project / ".git")) in triples


def test_a_git_file_naming_another_writable_dirs_git_is_guarded_once_read_only(
    tree: Path,
) -> None:
    other = tree / "other"
    other.mkdir()
    (other / ".git").write_text(f"gitdir: {tree / 'project/.git'}\n")
    command = argv(tree, writable=[tree / "project", other], protected=(".git",))
    git = str(tree / "project/.git")
    binds = [command[i : i + 3] for i, word in enumerate(command) if word.endswith("bind")]
    assert [b for b in binds if b[1] == git] == [["--ro-bind", git, git]] * 2


def test_the_refusal_of_a_symlinked_name_names_the_profile(tree: Path) -> None:
    (tree / "project/.vscode").symlink_to(tree / "home")
    with pytest.raises(ValueError, match="which the sandbox of profile 'test' cannot keep"):
        argv(tree, protected=(".vscode",))


@pytest.mark.parametrize(("network", "bound"), [(True, True), ("host", False)])
def test_the_bridges_python_stays_visible_under_the_hosts_tmp(
    tree: Path, monkeypatch: pytest.MonkeyPatch, network: bool | str, bound: bool
) -> None:
    """The bridge to the kernel's proxy runs on the gateway's Python: where that lies under
    the host's /tmp, it is bound read-only into the sandbox's /tmp, as the kernel's is."""
    gateway_python = fake_python(tree / "gateway-env")
    monkeypatch.setattr(sys, "executable", str(gateway_python))
    kernel_network.net_dir(tree / "state/kernels/k1").mkdir()
    command = argv(tree, network=network, protected=())
    prefix = str(tree / "gateway-env")
    start = command.index("/tmp", len(START)) + 1
    assert (command[start : start + 3] == ["--ro-bind", prefix, prefix]) is bound


def test_a_kernel_that_takes_only_tcp_is_reached_through_the_relay_inside(tree: Path) -> None:
    rules = replace(sandboxes.rules(writable=[tree / "project"], network=False), protected=())
    routes = [(tree / "state/kernels/k1/ipc/k-1", 9001), (tree / "state/kernels/k1/ipc/k-2", 9002)]
    command = bubblewrap.command(
        rules,
        CMD,
        bwrap=BWRAP,
        cwd=tree / "project",
        kernel_dir=tree / "state/kernels/k1",
        connection_file=None,
        relay=routes,
    )
    ending = command[command.index("--") + 1 :]
    kernel_dir = tree / "state/kernels/k1"
    assert ending == kernel_network.relayed(
        CMD, python=sys.executable, kernel_dir=kernel_dir, routes=routes
    )
    # run from the kernel's own copy, in the dir bound (read-only) into its sandbox
    net = str(kernel_network.net_dir(kernel_dir))
    assert ending[5] == f"{net}/port_relay.py" and Path(ending[5]).is_file()
    assert ["--ro-bind", net, net] in [command[i : i + 3] for i in range(len(command))]
    assert ending[-len(CMD) - 1 :] == [f"{routes[1][0]}=9002", *CMD]


def test_the_confiner_hands_its_sandbox_relay_to_bwrap(tree: Path) -> None:
    rules = replace(sandboxes.rules(writable=[tree / "project"], network=False), protected=())
    sandbox = SandboxLaunch(rules, tree / "state/kernels/k1", KernelLimits("k1", "none"), "b")
    sandbox.relay = [(tree / "state/kernels/k1/ipc/k-1", 9001)]
    argv = BubblewrapConfiner(BWRAP).command(
        sandbox, CMD, cwd=tree / "project", connection_file=tree / "c.json", unset_env=()
    )
    assert f"{sandbox.relay[0][0]}=9001" in argv


def test_the_home_dir_is_shown_as_its_view_lists_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for name in ("a/x", ".config/pip/pip.conf", ".bashrc"):
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text("")
    (home / "link").symlink_to(home / "a")
    env = home / ".tool/venv"
    env.mkdir(parents=True)
    view = home_view(home, [], [], xdg_dirs(home, {}))
    tmpfs: list[Path] = []
    argv = bubblewrap.home_arguments(view, [env, env / "lib"], tmpfs)
    assert argv == words(
        tmp_path,
        "--tmpfs T/home --dir T/home/.config",
        "--ro-bind-try T/home/a T/home/a",
        "--ro-bind-try T/home/.config/pip T/home/.config/pip",
        "--symlink T/home/a T/home/link",
        "--ro-bind T/home/.tool/venv T/home/.tool/venv",  # the environment, outermost once
    )
    assert str(home / ".bashrc") not in argv
    assert tmpfs == [home]
    assert (
        bubblewrap.home_arguments(home_view(Path("/"), [], [], xdg_dirs(Path("/"), {})), [], [])
        == []
    )
    gone = home_view(tmp_path / "no-home", [], [], xdg_dirs(tmp_path / "no-home", {}))
    assert bubblewrap.home_arguments(gone, [], tmpfs) == [] and tmpfs == [home]


def triples(argv: list[str]) -> set[tuple[str, str, str]]:
    """Return every three words in a row of `argv`."""
    return set(zip(argv, argv[1:], argv[2:], strict=False))


def test_a_readable_path_of_the_profile_is_shown_in_the_home_dir(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tree / "home"
    (home / ".newtool").mkdir()
    monkeypatch.setenv("HOME", str(home))
    rules = replace(sandboxes.rules(writable=[tree / "project"]), readable=(home / ".newtool",))
    command = bubblewrap.command(
        rules,
        CMD,
        bwrap=BWRAP,
        cwd=tree / "project",
        kernel_dir=tree / "state/kernels/k1",
        connection_file=None,
    )
    shown = ("--ro-bind-try", str(home / ".newtool"), str(home / ".newtool"))
    assert shown in triples(command)
    plain = bubblewrap.command(
        replace(rules, readable=()),
        CMD,
        bwrap=BWRAP,
        cwd=tree / "project",
        kernel_dir=tree / "state/kernels/k1",
        connection_file=None,
    )
    assert shown not in triples(plain)


def test_a_writable_dir_looked_at_only_in_part_is_said_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from loomgate.gateway.sandbox.policy import host_code

    monkeypatch.setattr(host_code, "MAX_DIRS", 1)
    monkeypatch.setattr(bubblewrap, "MAX_DIRS", 1)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with caplog.at_level("WARNING", logger=bubblewrap.__name__):
        bubblewrap.guarded(tmp_path, (), [tmp_path])
    assert caplog.messages == [
        f"Only the first 1 dirs of {tmp_path} were looked at for environments and bytecode "
        "caches (docs/sandbox.md)"
    ]
    caplog.clear()
    monkeypatch.setattr(host_code, "MAX_DIRS", 10)
    bubblewrap.guarded(tmp_path, (), [tmp_path])
    assert caplog.messages == []
