"""Landlock scopes on real processes: a scoped process reaches neither an abstract unix socket
nor a process outside its domain; an unscoped one reaches both."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from loomgate.gateway.sandbox import landlock

PAYLOAD = r"""
import errno, json, os, socket, subprocess, sys
from loomgate.gateway.sandbox import landlock
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
