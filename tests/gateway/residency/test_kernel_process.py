"""A kernel's own process: of the process the gateway launched and its descendants, the deepest
that runs the kernel command (its arguments name the connection file), read from a /proc; and
its resident memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loomgate.gateway.residency import kernel_process
from loomgate.gateway.residency.kernel_process import names_file, own_pid, rss_bytes

CONNECTION = "/run/user/1000/jupyter/runtime/kernel-0a1b.json"
KERNEL = ["python", "-m", "ipykernel_launcher", "-f", CONNECTION]
BWRAP = ["bwrap", "--unshare-pid", "--ro-bind", "/", "/", "--", *KERNEL]
BRIDGE = ["python", "-I", "-S", "bridge.py", "/k/net/proxy.sock", "3128", "--while", "7"]
SHELL = ["/bin/sh", "-c", '( … & ); shift 4; exec "$@"', "bridge", *BRIDGE[:4], *KERNEL]


STOPPED = "T"  # a frozen copy's state: it runs the kernel's command too


def fake_proc(root: Path, processes: dict[int, tuple[Any, ...]]) -> Path:
    """Write a /proc of `processes` (pid → parent, arguments[, state]) under `root`, each
    process's children in its threads' `children` files; return it."""
    proc = root / "proc"
    (proc / "self").mkdir(parents=True)  # not a pid: skipped
    for pid, (parent, arguments, *state) in processes.items():
        (proc / str(pid) / "task" / str(pid)).mkdir(parents=True)
        comm = Path(arguments[0]).name
        letter = state[0] if state else "S"
        (proc / str(pid) / "stat").write_text(f"{pid} ({comm}) {letter} {parent} {pid} {pid} 0\n")
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(map(str.encode, arguments)) + b"\0")
        (proc / str(pid) / "status").write_text(f"Name:\t{comm}\nVmRSS:\t   {pid * 100} kB\n")
    for pid, (parent, *_) in processes.items():
        if parent in processes:  # a second thread of the parent started it
            thread = proc / str(parent) / "task" / str(parent * 100 + pid)
            thread.mkdir(exist_ok=True)
            with (thread / "children").open("a") as f:
                f.write(f"{pid} ")
    return proc


@pytest.mark.parametrize(
    ("processes", "launched", "expected"),
    [
        # Unconfined, or Landlock alone (its shell execs the kernel): the launched process.
        ({10: (1, KERNEL)}, 10, 10),
        # bubblewrap: bwrap outside, the sandbox's init (bwrap too), then the kernel; its
        # bridge to the proxy beside it names no connection file.
        ({10: (1, BWRAP), 11: (10, BWRAP), 12: (11, KERNEL), 13: (11, BRIDGE)}, 10, 12),
        ({10: (1, BWRAP), 11: (10, BWRAP), 13: (11, BRIDGE), 14: (11, KERNEL)}, 10, 14),
        # A shell that runs the kernel as its child (not exec'd yet): the kernel, the deepest.
        ({10: (1, BWRAP), 11: (10, BWRAP), 12: (11, SHELL), 15: (12, KERNEL)}, 10, 15),
        # Only the launched process's descendants: another kernel elsewhere is never taken.
        ({10: (1, ["sleep", "60"]), 20: (1, KERNEL)}, 10, None),
        ({}, 10, None),
        ({10: (1, KERNEL)}, None, None),  # an upstream's kernel: no process here
        # Its frozen copies (checkpoints, starters) run its command too, stopped: never them.
        ({10: (1, BWRAP), 11: (10, BWRAP), 12: (11, KERNEL), 16: (12, KERNEL, STOPPED)}, 10, 12),
    ],
)
def test_the_kernel_is_the_deepest_process_running_its_command(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    processes: dict[int, tuple[Any, ...]],
    launched: int | None,
    expected: int | None,
) -> None:
    monkeypatch.setattr(kernel_process, "PROC", fake_proc(tmp_path, processes))
    assert own_pid(launched, CONNECTION) == expected


def test_without_proc_the_launched_process_is_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel_process, "PROC", tmp_path / "no-proc")  # macOS: sandbox-exec
    assert own_pid(10, CONNECTION) == 10


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (KERNEL, True),
        (["ir", "--connection-file=" + CONNECTION], True),
        (["kernel", "kernel-0a1b.json"], True),
        (["kernel", "-f", "/elsewhere/kernel-0a1b.json.bak"], False),
        (["kernel", "-f", "/elsewhere/other-kernel-0a1b.json"], False),
        (BRIDGE, False),
        ([], False),
    ],
)
def test_an_argument_names_the_connection_file(arguments: list[str], expected: bool) -> None:
    assert names_file([a.encode() for a in arguments], "kernel-0a1b.json") is expected


def test_resident_memory_comes_from_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_process, "PROC", fake_proc(tmp_path, {12: (1, KERNEL)}))
    assert rss_bytes(12) == 1200 * 1024
    assert rss_bytes(13) is None and rss_bytes(None) is None
