"""failure_of() on the messages real Python, shells and tools give under real bwrap (a plain
payload, no kernel): a hidden dir, a read-only file system around a writable one, no network."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.failures.rule_failures import failure_of
from loomgate.gateway.sandbox.network.network_rules import NO_NETWORK
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

# The payload's own report of the error that ended it, as a kernel's reply gives ename/evalue.
PYTHON_PAYLOAD = """\
import json, os, resource, shutil, socket, sys
try:
    exec(sys.argv[1])
except BaseException as e:
    print(json.dumps([type(e).__name__, str(e)]))
else:
    print(json.dumps(None))
"""


@dataclass(frozen=True)
class Place:
    """A home with a secret, a project in it, and the rules bwrap enforces around them."""

    home: Path
    project: Path
    rules: SandboxRules


@pytest.fixture
def place(tmp_path: Path) -> Place:
    home = (tmp_path / "home").resolve()
    project = home / "project"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("secret")
    (home / "old").mkdir()
    (home / "old" / "file").write_text("x")
    project.mkdir()
    (project / "a").write_text("a")
    (project / "locked").write_text("x")
    (project / "locked").chmod(0)
    rules = SandboxRules("strict", True, (project,), (home / ".ssh",), NO_NETWORK, 2 << 30, 512)
    return Place(home, project, rules)


def confined(place: Place, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run `argv` under bwrap as the rules say (no network), in the project."""
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is needed: apt-get install bubblewrap"
    command = [
        bwrap,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--unshare-user",
        "--cap-drop", "ALL",
        "--unshare-net",
        "--die-with-parent",
        "--perms", "0000", "--tmpfs", str(place.home / ".ssh"),
        "--bind", str(place.project), str(place.project),
        "--chdir", str(place.project),
        "--",
        *argv,
    ]  # fmt: skip
    env = {**os.environ, "HOME": str(place.home), "LC_ALL": "C.UTF-8"}
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


PYTHON = [
    ("open(os.path.expanduser('~/.ssh/id_rsa')).read()", "hidden", "~/.ssh/id_rsa"),
    ("os.listdir(os.path.expanduser('~/.ssh'))", "hidden", "~/.ssh"),
    ("open(os.path.expanduser('~/x'), 'w')", "read_only", "~/x"),
    ("os.mkdir(os.path.expanduser('~/d'))", "read_only", "~/d"),
    ("os.rename('a', os.path.expanduser('~/b'))", "read_only", "~/b"),
    ("shutil.rmtree(os.path.expanduser('~/old'))", "read_only", None),
    ("os.system('true'); open('/etc/hostname', 'a')", "read_only", "/etc/hostname"),
    ("socket.create_connection(('127.0.0.1', 9), timeout=5)", "network", None),
    ("socket.create_connection(('192.0.2.1', 80), timeout=5)", "network", None),
    ("socket.getaddrinfo('example.com', 80)", "network", None),
    (
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); bytearray(2 << 30)",
        "memory",
        None,
    ),
    ("open('locked').read()", None, None),  # the file's own mode, not the sandbox
]


@pytest.mark.parametrize(("code", "rule", "path"), PYTHON)
def test_python_errors(place: Place, code: str, rule: str | None, path: str | None) -> None:
    done = confined(place, [sys.executable, "-c", PYTHON_PAYLOAD, code])
    assert done.returncode == 0, done.stderr
    reported = json.loads(done.stdout)
    assert reported is not None, f"{code} did not fail under bwrap"
    name, value = reported
    found = failure_of(place.rules, error_name=name, error_value=value, output=done.stderr)
    expected_path = path.replace("~", str(place.home), 1) if path else None
    expected = None if rule is None else {"rule": rule, "profile": "strict", "path": expected_path}
    assert found == expected, (name, value)


SHELL = [
    ("cat ~/.ssh/id_rsa", "hidden", "~/.ssh/id_rsa"),
    ("ls ~/.ssh", "hidden", "~/.ssh"),
    ("cp /etc/hostname ~/.ssh/", "hidden", "~/.ssh/hostname"),
    ("touch ~/x", "read_only", "~/x"),
    ("mkdir ~/d", "read_only", "~/d"),
    ("echo x > ~/y", "read_only", "~/y"),
    ("sh -c 'echo x > /etc/y'", "read_only", "/etc/y"),
    ("cp /etc/hostname ~/h", "read_only", "~/h"),
    ("mv a ~/a", "read_only", "~/a"),
    ("rm -r ~/old", "read_only", "~/old/file"),
    ("curl -sS http://127.0.0.1:9/ -o /dev/null", "network", None),
    ("curl -sS http://example.com/ -o /dev/null", "network", None),
    ("cat locked", None, None),
]


@pytest.mark.parametrize(("script", "rule", "path"), SHELL)
def test_shell_and_tool_errors(
    place: Place, script: str, rule: str | None, path: str | None
) -> None:
    done = confined(place, ["bash", "-c", script])
    assert done.returncode != 0 and done.stderr, f"{script} did not fail under bwrap"
    found = failure_of(place.rules, error_name=None, error_value=None, output=done.stderr)
    expected_path = path.replace("~", str(place.home), 1) if path else None
    expected = None if rule is None else {"rule": rule, "profile": "strict", "path": expected_path}
    assert found == expected, done.stderr


def test_writing_in_the_project_works(place: Place) -> None:
    done = confined(place, ["bash", "-c", "echo x > made && cat made"])
    assert (done.returncode, done.stdout) == (0, "x\n"), done.stderr
    assert (place.project / "made").read_text() == "x\n"
