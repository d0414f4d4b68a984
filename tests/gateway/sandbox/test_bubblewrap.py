"""The bwrap argv for a kernel's rules run for real around a plain python payload: hiding,
interrupting and killing (the argv itself: test_bubblewrap_command.py)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import bubblewrap
from loomgate.gateway.sandbox.confinement.bubblewrap_confiner import BubblewrapConfiner
from tests.gateway.sandbox import sandboxes

pytestmark = pytest.mark.process  # the sandboxes helper starts them


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project with a hidden .env, a state dir holding the kernel's dir, a runtime dir."""
    for directory in ("project", "state/kernels/k1", "runtime", "home/.ssh"):
        (tmp_path / directory).mkdir(parents=True)
    for file in ("project/.env", "state/token", "runtime/kernel-own.json", "runtime/other.json"):
        (tmp_path / file).write_text("x")
    bubblewrap.prepare_kernel_dir(tmp_path / "state/kernels/k1")
    return tmp_path


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
        BubblewrapConfiner("bwrap").signal_init(box.init_pid, signal.SIGINT)
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
