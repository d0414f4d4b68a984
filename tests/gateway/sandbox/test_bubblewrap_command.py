"""The bwrap argv for a kernel's rules, read whole (bwrap's later mounts lie over earlier ones,
so its order is the policy), its path helpers, and the kernel's own host dir; no process runs."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import bubblewrap
from tests.gateway.sandbox import sandboxes

BWRAP = "/usr/bin/bwrap"
CMD = ["python", "-c", "pass"]
START = [BWRAP, *bubblewrap.ISOLATION]
# The root, read-only, with its own /dev and /proc (/proc's writable files made read-only).
ROOT = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
ROOT += [w for p in bubblewrap.PROC_READ_ONLY if p.exists() for w in ("--ro-bind", str(p), str(p))]
ROOT += ["--perms", "1777", "--tmpfs", "/tmp"]


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
    network: bool = True,
    writable: list[Path] | None = None,
    hidden: list[Path] | None = None,
    kernel_dir: str = "state/kernels/k1",
    connection: str | None = "runtime/kernel-own.json",
    unset_env: tuple[str, ...] = ("JPY_PARENT_PID", "TOKEN", "JPY_PARENT_PID"),
) -> list[str]:
    """Return the command for `tree`'s kernel under rules with these paths."""
    rules = sandboxes.rules(
        writable=[tree / "project"] if writable is None else writable,
        hidden=[tree / "project/.env", tree / "state", tree / "runtime"]
        if hidden is None
        else hidden,
        network=network,
    )
    return bubblewrap.command(
        rules,
        CMD,
        bwrap=BWRAP,
        cwd=tree / "project",
        kernel_dir=tree / kernel_dir,
        connection_file=tree / connection if connection is not None else None,
        unset_env=unset_env,
    )


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
            # git's hooks and config stay read-only inside the writable project
            "--ro-bind T/project/.git/hooks T/project/.git/hooks",
            "--ro-bind T/project/.git/config T/project/.git/config",
            # hidden after writable: a hidden file in a writable dir stays hidden
            f"--ro-bind {empty} T/project/.env",
            # dirs on the way to the kernel's own files: enterable, what they hold hidden
            "--perms 0111 --tmpfs T/state",
            "--perms 0111 --tmpfs T/state/kernels",
            "--perms 0111 --tmpfs T/state/kernels/k1",
            f"--ro-bind {empty} T/state/kernels/k1/hidden",
            f"--ro-bind {empty} T/state/token",
            "--perms 0111 --tmpfs T/runtime",
            f"--ro-bind {empty} T/runtime/other.json",  # the symlink is simply not there
            # the kernel's own: after the hiding, then what bwrap mounted on made read-only
            "--bind T/state/kernels/k1/ipc T/state/kernels/k1/ipc",
            "--bind T/state/kernels/k1/packages T/state/kernels/k1/packages",
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
    )
    assert command[len(START) + len(ROOT) : -len(CMD) - 1] == words(
        tree,
        "--bind T/project T/project",
        "--ro-bind T/project/.git/hooks T/project/.git/hooks",
        "--ro-bind T/project/.git/config T/project/.git/config",
        "--perms 0000 --tmpfs T/home/.ssh",
        "--perms 0111 --tmpfs T/state/kernels/k1",
        "--ro-bind T/link-to-kernel/hidden T/state/kernels/k1/hidden",
        "--bind T/state/kernels/k1/ipc T/state/kernels/k1/ipc",
        "--bind T/state/kernels/k1/packages T/state/kernels/k1/packages",
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
    )
    assert command[len(START) + len(ROOT) : -len(CMD) - 1] == words(
        tree,
        "--bind T/project T/project",
        "--ro-bind T/project/.git/hooks T/project/.git/hooks",
        "--ro-bind T/project/.git/config T/project/.git/config",
        "--bind T/home T/home",  # no .git there: nothing guarded
        "--perms 0000 --tmpfs T/home",  # hidden though writable, and .ssh with it
        "--perms 0111 --tmpfs T/state/kernels/k1",
        "--ro-bind T/state/kernels/k1/hidden T/state/kernels/k1/hidden",
        "--bind T/state/kernels/k1/ipc T/state/kernels/k1/ipc",
        "--bind T/state/kernels/k1/packages T/state/kernels/k1/packages",
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
    with pytest.raises(ProcessLookupError):
        bubblewrap.interrupt(unused_pid())
    with pytest.raises(ProcessLookupError):
        bubblewrap.kill(unused_pid())
