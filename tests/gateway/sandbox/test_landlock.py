"""Landlock on real processes and threads: a scoped process reaches neither an abstract unix
socket nor a process outside its domain, an unscoped one reaches both; a whole ruleset allows
what it names (files, TCP ports) and nothing else; the rights each ABI has."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from loomgate.gateway.sandbox.confinement import landlock

PAYLOAD = r"""
import errno, json, os, socket, subprocess, sys
from loomgate.gateway.sandbox.confinement import landlock
name, outside, scoped = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
if scoped:
    landlock.restrict_scopes()
def attempt(call):
    try:
        call()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def connect():
    with socket.socket(socket.AF_UNIX) as s:
        s.connect("\0" + name)
child = subprocess.run(
    [sys.executable, "-c", f"import os; os.kill({outside}, 0)"], capture_output=True, text=True
)
print(json.dumps({
    "abstract": attempt(connect),
    "signal": attempt(lambda: os.kill(outside, 0)),
    "child_signal": "ok" if child.returncode == 0 else child.stderr.strip().splitlines()[-1],
    "own_child": attempt(lambda: subprocess.run(["true"], check=True)),
}))
"""


@pytest.fixture
def listener() -> Iterator[str]:
    """An abstract unix socket listening outside; its name."""
    name = f"loomgate-landlock-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("\0" + name)
        server.listen()
        yield name


def test_this_kernel_has_scopes() -> None:
    assert landlock.abi_version() >= landlock.SCOPES_ABI


@pytest.mark.parametrize("machine", ["x86_64", "aarch64", "arm64"])
def test_the_syscall_numbers_are_the_unified_ones(machine: str) -> None:
    assert landlock.SYSCALLS[machine] == 444  # create_ruleset; add_rule 445, restrict_self 446


@pytest.mark.parametrize(
    ("scoped", "expected"),
    [
        (True, {"abstract": "EPERM", "signal": "EPERM", "own_child": "ok"}),
        (False, {"abstract": "ok", "signal": "ok", "child_signal": "ok", "own_child": "ok"}),
    ],
    ids=["scoped", "unscoped"],
)
def test_scopes_hold_the_process_and_its_children(
    listener: str, scoped: bool, expected: dict[str, str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PAYLOAD, listener, str(os.getpid()), "1" if scoped else "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    if scoped:
        assert result.pop("child_signal").startswith("PermissionError")
    assert result == expected


T = TypeVar("T")


def on_a_thread(ruleset: landlock.Ruleset, call: Callable[[], T]) -> T:
    """Return `call()` run on a thread of its own restricted to `ruleset` first (this test's own
    thread must stay free)."""
    done: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            landlock.restrict(ruleset)
            done.append(call())
        except BaseException as error:
            failed.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return done[0]


def attempt(call: Callable[[], object]) -> str:
    """Return "ok", or the errno name `call` failed with."""
    try:
        call()
    except OSError as e:
        return errno.errorcode[e.errno or 0]
    return "ok"


@pytest.mark.parametrize(
    ("abi", "rights", "size"),
    [
        (0, 0, 8),
        (1, (1 << 13) - 1, 8),
        (2, (1 << 14) - 1, 8),
        (3, (1 << 15) - 1, 8),
        (4, (1 << 15) - 1, 16),
        (5, (1 << 16) - 1, 16),
        (6, (1 << 16) - 1, 24),
        (7, (1 << 16) - 1, 24),
    ],
)
def test_each_abi_handles_its_own_rights(abi: int, rights: int, size: int) -> None:
    assert landlock.fs_rights(abi) == rights
    assert landlock.attr_size(abi) == size
    assert landlock.fs_rights(abi) & landlock.WRITE == landlock.WRITE & rights


def test_a_whole_ruleset_allows_only_what_it_names(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "open").mkdir(parents=True)
    (tree / "closed").write_text("no")
    (tree / "readable").write_text("yes")
    allowed, other = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    ruleset = landlock.Ruleset(
        landlock.abi_version(),
        (
            (tree / "open", landlock.READ | landlock.WRITE),
            (tree / "readable", landlock.READ | landlock.WRITE),  # a file: its file rights only
            (tree / "gone", landlock.READ),  # not there: left out
        ),
        tcp_ports=(allowed.getsockname()[1],),
        scopes=True,
    )
    port, other_port = allowed.getsockname()[1], other.getsockname()[1]
    try:
        seen = on_a_thread(
            ruleset,
            lambda: {
                "write_open": attempt(lambda: (tree / "open" / "new").write_text("x")),
                "read_readable": attempt((tree / "readable").read_text),
                "read_closed": attempt((tree / "closed").read_text),
                "list_tree": attempt(lambda: list(tree.iterdir())),
                "connect_allowed": attempt(
                    lambda: socket.create_connection(("127.0.0.1", port), 5).close()
                ),
                "connect_other": attempt(
                    lambda: socket.create_connection(("127.0.0.1", other_port), 5).close()
                ),
                "bind": attempt(lambda: socket.create_server(("127.0.0.1", 0)).close()),
            },
        )
    finally:
        allowed.close()
        other.close()
    assert seen == {
        "write_open": "ok",
        "read_readable": "ok",
        "read_closed": "EACCES",
        "list_tree": "EACCES",
        "connect_allowed": "ok",
        "connect_other": "EACCES",
        "bind": "EACCES",
    }
    assert (tree / "closed").read_text() == "no"  # this thread was never restricted


def test_a_ruleset_for_an_abi_this_kernel_lacks_is_refused() -> None:
    ruleset = landlock.Ruleset(landlock.abi_version() + 1, ())
    with pytest.raises(landlock.LandlockUnavailable, match="needs Landlock ABI"):
        on_a_thread(ruleset, lambda: None)
