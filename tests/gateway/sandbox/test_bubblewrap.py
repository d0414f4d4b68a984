"""The bwrap argv for a kernel's rules (its order, real paths, skipped and nested paths), and
the same argv run for real around a plain python payload."""

from __future__ import annotations

import signal
import stat
import time
from pathlib import Path

import pytest

from loomgate.gateway.sandbox import bubblewrap
from tests.gateway.sandbox import sandboxes

pytestmark = pytest.mark.process  # the sandboxes helper starts them

BWRAP = "/usr/bin/bwrap"
CMD = ["python", "-c", "pass"]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project with a hidden .env, a state dir holding the kernel's dir, a runtime dir."""
    for directory in ("project", "state/kernels/k1", "runtime", "home/.ssh"):
        (tmp_path / directory).mkdir(parents=True)
    for file in ("project/.env", "state/token", "runtime/kernel-own.json", "runtime/other.json"):
        (tmp_path / file).write_text("x")
    bubblewrap.prepare_kernel_dir(tmp_path / "state/kernels/k1")
    return tmp_path


def argv(tree: Path, network: bool = True, **paths: list[Path]) -> list[str]:
    """Return the command for `tree`'s kernel under rules with `paths`."""
    rules = sandboxes.rules(
        writable=paths.get("writable", [tree / "project"]),
        hidden=paths.get("hidden", [tree / "project/.env", tree / "state", tree / "runtime"]),
        network=network,
    )
    return bubblewrap.command(
        rules,
        CMD,
        bwrap=BWRAP,
        cwd=tree / "project",
        kernel_dir=tree / "state/kernels/k1",
        connection_file=tree / "runtime/kernel-own.json",
        unset_env=["JPY_PARENT_PID", "TOKEN", "JPY_PARENT_PID"],
    )


def position(argv: list[str], *words: str) -> int:
    """Return where the run of `words` starts in `argv`."""
    for index in range(len(argv)):
        if argv[index : index + len(words)] == list(words):
            return index
    raise AssertionError(f"{words} not in {argv}")


def test_later_mounts_lie_over_earlier_ones(tree: Path) -> None:
    command = argv(tree)
    ipc, connection = str(tree / "state/kernels/k1/ipc"), str(tree / "runtime/kernel-own.json")
    order = [
        position(command, "--ro-bind", "/", "/"),
        position(command, "--proc", "/proc"),
        position(command, "--ro-bind", "/proc/sys", "/proc/sys"),
        position(command, "--tmpfs", "/tmp"),
        position(command, "--bind", str(tree / "project"), str(tree / "project")),
        position(command, "--ro-bind", str(tree / "state/kernels/k1/hidden")),  # the .env
        position(command, "--tmpfs", str(tree / "state")),
        position(command, "--bind", ipc, ipc),
        position(command, "--ro-bind", connection, connection),
        position(command, "--remount-ro", str(tree / "state")),
        position(command, "--chdir", str(tree / "project")),
        position(command, "--", *CMD),
    ]
    assert order == sorted(order)
    assert command[0] == BWRAP and command[-3:] == CMD


def test_isolation_is_always_there_and_never_dies_with_the_gateway(tree: Path) -> None:
    command = argv(tree)
    assert command[1 : 1 + len(bubblewrap.ISOLATION)] == list(bubblewrap.ISOLATION)
    assert "--die-with-parent" not in command
    assert position(command, "--cap-drop", "ALL") > 0
    assert position(command, "--setenv", "TMPDIR", "/tmp") > 0


@pytest.mark.parametrize(("network", "unshared"), [(True, False), (False, True)])
def test_network_off_unshares_it(tree: Path, network: bool, unshared: bool) -> None:
    assert ("--unshare-net" in argv(tree, network=network)) is unshared


def test_each_variable_is_unset_once(tree: Path) -> None:
    command = argv(tree)
    unset = [command[i + 1] for i, word in enumerate(command) if word == "--unsetenv"]
    assert unset == ["JPY_PARENT_PID", "TOKEN"]


def test_hidden_dirs_on_the_way_to_the_kernels_files_can_be_entered_not_listed(
    tree: Path,
) -> None:
    command = argv(tree, hidden=[tree / "state", tree / "runtime", tree / "home/.ssh"])
    empty = str(tree / "state/kernels/k1/hidden")
    assert position(command, "--perms", "0111", "--tmpfs", str(tree / "state")) > 0
    assert position(command, "--perms", "0111", "--tmpfs", str(tree / "state/kernels")) > 0
    assert position(command, "--perms", "0111", "--tmpfs", str(tree / "runtime")) > 0
    assert position(command, "--perms", "0111", "--tmpfs", str(tree / "state/kernels/k1")) > 0
    assert position(command, "--perms", "0000", "--tmpfs", str(tree / "home/.ssh")) > 0
    # What those dirs hold is hidden in turn; the kernel's own files are bound, not hidden.
    assert position(command, "--ro-bind", empty, str(tree / "state/token")) > 0
    assert position(command, "--ro-bind", empty, str(tree / "runtime/other.json")) > 0
    assert position(command, "--ro-bind", empty, str(tree / "state/kernels/k1/hidden")) > 0
    assert str(tree / "runtime/kernel-own.json") not in command[: position(command, "--bind")]
    hides_own = ["--ro-bind", empty, str(tree / "runtime/kernel-own.json")]
    with pytest.raises(AssertionError):
        position(command, *hides_own)


def test_paths_are_bound_where_they_really_are(tree: Path) -> None:
    (tree / "link-to-project").symlink_to(tree / "project")
    (tree / "link-to-ssh").symlink_to(tree / "home/.ssh")
    command = argv(tree, writable=[tree / "link-to-project"], hidden=[tree / "link-to-ssh"])
    assert position(command, "--bind", str(tree / "project"), str(tree / "project")) > 0
    assert position(command, "--tmpfs", str(tree / "home/.ssh")) > 0
    assert not any("link-to" in word for word in command[:-3] if not word.startswith("--"))


def test_missing_and_nested_paths_are_left_out(tree: Path) -> None:
    missing = tree / "nowhere"
    command = argv(
        tree,
        writable=[tree / "project", missing, tree / "project"],
        hidden=[missing / "x", tree / "home", tree / "home/.ssh", tree / "home/.ssh"],
    )
    assert str(missing) not in " ".join(command)
    assert str(tree / "home/.ssh") not in command  # hiding home hides it
    assert command.count(str(tree / "project")) == 3  # bound once (twice named), and --chdir


@pytest.mark.parametrize(
    ("confined", "cmd", "prepared", "message"),
    [
        (False, CMD, True, "not confined"),
        (True, [], True, "kernel command is empty"),
        (True, CMD, False, "prepare_kernel_dir"),
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


def test_the_kernel_dir_is_hidden_but_its_ipc_dir(tmp_path: Path) -> None:
    kernel_dir = tmp_path / "k"
    bubblewrap.prepare_kernel_dir(kernel_dir)
    (kernel_dir / "bwrap-info.json").write_text("{}")
    command = bubblewrap.command(
        sandboxes.rules(),
        CMD,
        bwrap=BWRAP,
        cwd=tmp_path,
        kernel_dir=kernel_dir,
        connection_file=None,
    )
    ipc = str(bubblewrap.ipc_dir(kernel_dir))
    assert position(command, "--perms", "0111", "--tmpfs", str(kernel_dir)) > 0
    info = str(bubblewrap.info_file(kernel_dir))
    assert position(command, "--ro-bind", str(bubblewrap.empty_file(kernel_dir)), info) > 0
    assert position(command, "--bind", ipc, ipc) > position(command, "--tmpfs", str(kernel_dir))


def test_the_kernel_dir_is_private(tmp_path: Path) -> None:
    kernel_dir = tmp_path / "a" / "k"
    bubblewrap.prepare_kernel_dir(kernel_dir)
    bubblewrap.info_file(kernel_dir).write_text('{"child-pid": 1234}')
    bubblewrap.prepare_kernel_dir(kernel_dir)  # again: taken as it is, but for the last pid
    assert not bubblewrap.info_file(kernel_dir).exists()
    assert stat.S_IMODE(kernel_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(bubblewrap.empty_file(kernel_dir).stat().st_mode) == 0
    assert bubblewrap.empty_file(kernel_dir).stat().st_size == 0
    assert bubblewrap.ipc_dir(kernel_dir).is_dir()


def test_hidden_wins_over_writable_and_symlinks_lead_to_the_hidden(tree: Path) -> None:
    (tree / "project/link-to-env").symlink_to(tree / "project/.env")
    payload = (
        "import json\n"
        "def attempt(path, mode):\n"
        "    try:\n        open(path, mode).close()\n        return 'ok'\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        "print(json.dumps([attempt('written', 'w'), attempt('.env', 'r'),"
        " attempt('link-to-env', 'r'), attempt('.env', 'w')]))"
    )
    rules = sandboxes.rules(writable=[tree / "project"], hidden=[tree / "project/link-to-env"])
    done = sandboxes.run(rules, payload, cwd=tree / "project", kernel_dir=tree / "k")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '["ok", "PermissionError", "PermissionError", "OSError"]'
    assert (tree / "project/written").exists() and (tree / "project/.env").read_text() == "x"


def test_interrupt_reaches_the_kernel_in_the_sandbox(tree: Path) -> None:
    payload = (
        "import signal, sys\n"
        "try:\n"
        "    print('ready', flush=True)\n"
        "    signal.pause()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "print(sys.stdin.readline().strip(), flush=True)\n"
    )
    rules = sandboxes.rules(writable=[tree / "project"])
    with sandboxes.started(rules, payload, cwd=tree / "project", kernel_dir=tree / "k") as box:
        assert box.process.stdout is not None and box.process.stdin is not None
        assert box.process.stdout.readline() == "ready\n"
        bubblewrap.interrupt(box.init_pid)
        assert box.process.stdout.readline() == "interrupted\n"
        box.process.stdin.write("still running\n")
        box.process.stdin.flush()
        assert box.process.stdout.readline() == "still running\n"
        assert box.process.wait(timeout=30) == 0


def descendants(pid: int) -> dict[int, str]:
    """Return the host pids under `pid` with their start times."""
    found: dict[int, str] = {}
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for child in map(int, children):
        started = sandboxes.start_time(child)
        if started is not None:
            found[child] = started
        found.update(descendants(child))
    return found


def test_kill_ends_the_sandbox_with_its_children(tree: Path) -> None:
    payload = (
        "import subprocess, sys\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "print(child.pid, flush=True)\n"
        "sys.stdin.readline()\n"
    )
    rules = sandboxes.rules(writable=[tree / "project"])
    with sandboxes.started(rules, payload, cwd=tree / "project", kernel_dir=tree / "k") as box:
        assert box.process.stdout is not None
        assert box.process.stdout.readline().strip().isdigit()
        inside = descendants(box.init_pid)
        assert len(inside) == 2  # the payload and its sleep
        bubblewrap.kill(box.init_pid)
        assert box.process.wait(timeout=30) != 0
        deadline = time.monotonic() + 30
        while any(sandboxes.start_time(pid) == started for pid, started in inside.items()):
            assert time.monotonic() < deadline, "a process of the sandbox outlived its init"
            time.sleep(0.01)


def test_signalling_bwrap_alone_leaves_the_sandbox_running(tree: Path) -> None:
    payload = "import sys\nprint('ready', flush=True)\nsys.stdin.readline()\n"
    rules = sandboxes.rules(writable=[tree / "project"])
    with sandboxes.started(rules, payload, cwd=tree / "project", kernel_dir=tree / "k") as box:
        assert box.process.stdout is not None
        assert box.process.stdout.readline() == "ready\n"
        box.process.send_signal(signal.SIGINT)  # jupyter_client's interrupt of its "kernel"
        assert box.process.wait(timeout=30) == -signal.SIGINT
        assert sandboxes.start_time(box.init_pid) == box.init_start  # the sandbox goes on
        bubblewrap.kill(box.init_pid)
        deadline = time.monotonic() + 30
        while sandboxes.start_time(box.init_pid) == box.init_start:
            assert time.monotonic() < deadline, "the sandbox init outlived SIGKILL"
            time.sleep(0.01)
