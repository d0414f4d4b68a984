"""failure_of(): which rule a failed cell ran into, from the messages real tools give."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.failures.rule_failures import (
    command_errors,
    empty_dir,
    failure_of,
    line_kind,
    path_before,
    protected,
    unquote,
)
from loomgate.gateway.sandbox.network.network_rules import (
    HOST_NETWORK,
    NO_NETWORK,
    PUBLIC,
)
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

H = "/nonexistent-home"
WS = SandboxRules(
    "workspace",
    True,
    (Path(f"{H}/project"),),
    tuple(
        Path(p)
        for p in (
            f"{H}/.ssh",
            f"{H}/.aws",
            f"{H}/.netrc",
            f"{H}/.local/state/loomgate",
            f"{H}/.local/share/jupyter/runtime",
            "/run/dbus",
        )
    ),
    PUBLIC,
    4 << 30,
    512,
)
ST = replace(WS, profile="strict", network=NO_NETWORK)
HOSTED = replace(WS, profile="hosted", network=HOST_NETWORK)
NO_MEMORY = replace(ST, profile="mine", memory=None)
UNLIMITED = replace(NO_MEMORY, processes=None)
NONE = SandboxRules("none", False, (), (), HOST_NETWORK, None, None)

Case = tuple[SandboxRules, str | None, str | None, str, str | None, str | None]


def err(rules: SandboxRules, name: str, value: str, rule: str | None, path: str | None) -> Case:
    """A cell that raised `name: value`."""
    return (rules, name, value, "", rule, path)


def out(rules: SandboxRules, stderr: str, rule: str | None, path: str | None) -> Case:
    """A cell whose subprocess wrote `stderr` (one line unless it has its own)."""
    return (rules, None, None, stderr if stderr.endswith("\n") else stderr + "\n", rule, path)


DENIED = "[Errno 13] Permission denied:"
EROFS = "[Errno 30] Read-only file system:"
EAI_AGAIN = "[Errno -3] Temporary failure in name resolution"

# fmt: off
HIDDEN = [
    err(WS, "PermissionError", f"{DENIED} '{H}/.ssh/id_rsa'", "hidden", f"{H}/.ssh/id_rsa"),
    err(WS, "PermissionError", f"{DENIED} '{H}/.ssh'", "hidden", f"{H}/.ssh"),
    err(WS, "PermissionError", f"{DENIED} '{H}/.netrc'", "hidden", f"{H}/.netrc"),
    err(WS, "PermissionError", f"{DENIED} '{H}/.local/state/loomgate/gateway.json'",
        "hidden", f"{H}/.local/state/loomgate/gateway.json"),
    err(WS, "PermissionError", f"{DENIED} '{H}/.local/share/jupyter/runtime/jpserver-42.json'",
        "hidden", f"{H}/.local/share/jupyter/runtime/jpserver-42.json"),
    err(WS, "PermissionError", f"{DENIED} '{H}/project/../.ssh/id_rsa'",
        "hidden", f"{H}/.ssh/id_rsa"),
    err(WS, "OSError", f"{EROFS} '{H}/.ssh/new'", "hidden", f"{H}/.ssh/new"),
    err(WS, "PermissionError", f"[Errno 1] Operation not permitted: '{H}/.ssh/id_rsa'",
        "hidden", f"{H}/.ssh/id_rsa"),
    err(ST, "PermissionError", f"{DENIED} '/run/dbus/system_bus_socket'",
        "hidden", "/run/dbus/system_bus_socket"),
    (WS, "CalledProcessError", "Command '['cat', 'x']' returned non-zero exit status 1.",
     f"cat: {H}/.aws/credentials: Permission denied\n", "hidden", f"{H}/.aws/credentials"),
    out(WS, f"ls: cannot open directory '{H}/.ssh': Permission denied", "hidden", f"{H}/.ssh"),
    out(WS, f"sh: 1: cannot open {H}/.ssh/id_rsa: Permission denied",
        "hidden", f"{H}/.ssh/id_rsa"),
    out(WS, f"bash: line 1: {H}/.ssh/authorized_keys: Permission denied",
        "hidden", f"{H}/.ssh/authorized_keys"),
    out(WS, f"/usr/bin/python3: can't open file '{H}/.ssh/x.py': [Errno 13] Permission denied",
        "hidden", f"{H}/.ssh/x.py"),
    out(WS, f"cp: cannot stat '{H}/.ssh/hostname': Permission denied",
        "hidden", f"{H}/.ssh/hostname"),
]
READ_ONLY = [
    err(WS, "OSError", f"{EROFS} '{H}/x'", "read_only", f"{H}/x"),
    err(WS, "OSError", f"{EROFS} '/etc/passwd'", "read_only", "/etc/passwd"),
    err(WS, "OSError", f"{EROFS} '/etc/hostname' -> '{H}/h'", "read_only", f"{H}/h"),
    err(WS, "OSError", f"{EROFS} '{H}/a' -> '{H}/project/b'", "read_only", f"{H}/a"),
    err(WS, "OSError", f"{EROFS} 'copyright'", "read_only", None),  # rmtree's, relative
    err(WS, "OSError", f'{EROFS} "{H}/it\'s"', "read_only", f"{H}/it's"),
    err(WS, "OSError", f"[Errno 18] Invalid cross-device link: 'a' -> '{H}/b'",
        "read_only", f"{H}/b"),
    out(WS, "ERROR: Could not install packages due to an OSError: "
        f"{EROFS} '/usr/lib/python3/dist-packages/six.py'",
        "read_only", "/usr/lib/python3/dist-packages/six.py"),
    out(WS, "touch: cannot touch '/etc/x': Read-only file system", "read_only", "/etc/x"),
    out(WS, f"mkdir: cannot create directory ‘{H}/d’: Read-only file system",
        "read_only", f"{H}/d"),
    out(WS, "rm: cannot remove '/etc/hostname': Read-only file system",
        "read_only", "/etc/hostname"),
    out(WS, f"cp: cannot create regular file '{H}/hostname': Read-only file system",
        "read_only", f"{H}/hostname"),
    out(WS, f"sh: 1: cannot create {H}/y: Read-only file system", "read_only", f"{H}/y"),
    out(WS, f"/tmp/probe.sh: line 10: {H}/y: Read-only file system", "read_only", f"{H}/y"),
    out(WS, f"mv: cannot move '{H}/project/w' to '{H}/w2': Read-only file system",
        "read_only", f"{H}/w2"),
    out(WS, f"mv: inter-device move failed: 'a' to '{H}/a'; unable to remove target: "
        "Read-only file system", "read_only", f"{H}/a"),
    out(WS, f"ln: failed to create symbolic link '{H}/l': Read-only file system",
        "read_only", f"{H}/l"),
    out(WS, f"tee: {H}/t: Read-only file system", "read_only", f"{H}/t"),
    out(WS, f"Cannot write to ‘{H}/index.html’ (Read-only file system).",
        "read_only", f"{H}/index.html"),
    out(WS, f"Warning: Failed to open the file {H}/out.html: Read-only file system\n"
        "curl: (23) Failure writing output to destination\n", "read_only", f"{H}/out.html"),
    out(WS, "sh: 1: cannot create x: Read-only file system", "read_only", None),
    out(WS, "cat: : Read-only file system", "read_only", None),  # no path given
    # every line is read: one the rules do not explain does not end the search
    err(WS, "PermissionError", f"{DENIED} '/etc/shadow'\n{EROFS} '/etc/x'", "read_only", "/etc/x"),
    out(WS, f"rm: cannot remove '{H}/.ssh/x': Permission denied\n"
        "Cannot write to ‘/etc/shadow’ (Permission denied).\n", "hidden", f"{H}/.ssh/x"),
    # many lines: the last one the rules explain
    out(WS, "rm: cannot remove '/usr/share/doc/a': Read-only file system\n" * 3000
        + "rm: cannot remove '/usr/share/doc/b': Read-only file system",
        "read_only", "/usr/share/doc/b"),
]
P = f"{H}/project"
VENV = replace(WS, read_only=(Path(f"{P}/.venv"),))
# A write that hit what stays read-only inside the writable dir: .git's parts, .git itself (a
# mount point), a protected name (its placeholder is a dir), the environment.
PROTECTED = [
    err(WS, "OSError", f"{EROFS} '{P}/.git/hooks/pre-commit'",
        "protected", f"{P}/.git/hooks/pre-commit"),
    err(WS, "OSError", f"{EROFS} '{P}/.git/config'", "protected", f"{P}/.git/config"),
    err(WS, "OSError", f"[Errno 16] Device or resource busy: '{P}/.git' -> '{P}/.git-old'",
        "protected", f"{P}/.git"),
    err(WS, "OSError", f"{EROFS} '{P}/.vscode/tasks.json'", "protected", f"{P}/.vscode/tasks.json"),
    err(WS, "OSError", f"[Errno 18] Invalid cross-device link: '{P}/x' -> '{P}/.envrc'",
        "protected", f"{P}/.envrc"),
    out(WS, f"touch: cannot touch '{P}/.claude/settings.json': Read-only file system",
        "protected", f"{P}/.claude/settings.json"),
    out(WS, f"rm: cannot remove '{P}/.vscode': Device or resource busy",
        "protected", f"{P}/.vscode"),
    err(VENV, "OSError", f"{EROFS} '{P}/.venv/lib/python3.11/site-packages/x.pth'",
        "protected", f"{P}/.venv/lib/python3.11/site-packages/x.pth"),
    out(VENV, "ERROR: Could not install packages due to an OSError: "
        f"{EROFS} '{P}/.venv/bin/x'", "protected", f"{P}/.venv/bin/x"),
    # .git's own objects, refs and index are writable: git's lock is no rule of the sandbox
    out(WS, f"fatal: Unable to create '{P}/.git/index.lock': File exists.", None, None),
    out(WS, f"mv: cannot move '{P}/d' to '{P}/d2': Device or resource busy", None, None),
]
# Not the sandbox: the file's own permissions, a read-only file system inside the writable
# set, a rename across mounts into it, a missing file, errors that are no path's.
NOT_THE_SANDBOX = [
    err(WS, "PermissionError", f"{DENIED} '/etc/shadow'", None, None),
    err(WS, "PermissionError", f"{DENIED} '{H}/project/locked'", None, None),
    err(WS, "PermissionError", f"{DENIED} '{H}/other'", None, None),
    err(WS, "PermissionError", "[Errno 1] Operation not permitted: '/etc/hostname'", None, None),
    err(WS, "OSError", f"{EROFS} '{H}/project/mnt/x'", None, None),
    err(WS, "OSError", f"[Errno 18] Invalid cross-device link: '/tmp/t' -> '{H}/project/t'",
        None, None),
    err(WS, "OSError", f"[Errno 18] Invalid cross-device link: '{H}/project/t' -> 'b'",
        None, None),
    out(WS, "cat: /etc/shadow: Permission denied", None, None),
    out(WS, "touch: cannot touch '/etc/passwd': Permission denied", None, None),
    err(WS, "FileNotFoundError", f"[Errno 2] No such file or directory: '{H}/.ssh/id_rsa'",
        None, None),
    err(WS, "ValueError", "invalid literal for int() with base 10: 'Permission denied'",
        None, None),
    err(WS, "NameError", "name 'x' is not defined", None, None),
    (WS, None, None, "", None, None),
    # a rename across mounts is judged by its target, so it needs both paths
    err(WS, "OSError", "[Errno 18] Invalid cross-device link: '/etc/x'", None, None),
    out(WS, "mv: cannot move '/etc/x': Invalid cross-device link", None, None),
    out(WS, "mv: : Invalid cross-device link", None, None),
]
NETWORK = [
    err(ST, "ConnectionRefusedError", "[Errno 111] Connection refused", "network", None),
    err(ST, "OSError", "[Errno 101] Network is unreachable", "network", None),
    err(ST, "gaierror", EAI_AGAIN, "network", None),
    err(ST, "gaierror", "[Errno -2] Name or service not known", "network", None),
    err(ST, "OSError", "[Errno 99] Cannot assign requested address", "network", None),
    err(ST, "URLError", f"<urlopen error {EAI_AGAIN}>", "network", None),
    err(ST, "ConnectionError", "HTTPConnectionPool(host='example.com', port=80): Max retries "
        "exceeded with url: / (Caused by NameResolutionError(\"HTTPConnection(host='example"
        f".com', port=80): Failed to resolve 'example.com' ({EAI_AGAIN})\"))", "network", None),
    err(ST, "ConnectError", "[Errno 101] Network is unreachable", "network", None),
    err(ST, "ClientConnectorError", "Cannot connect to host example.com:443 ssl:default "
        "[Temporary failure in name resolution]", "network", None),
    out(ST, "curl: (6) Could not resolve host: example.com", "network", None),
    out(ST, "curl: (7) Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to "
        "server", "network", None),
    out(ST, "Resolving example.com (example.com)... failed: Temporary failure in name "
        "resolution.\nwget: unable to resolve host address ‘example.com’\n", "network", None),
    out(ST, "Connecting to 1.1.1.1:80... failed: Network is unreachable.", "network", None),
    out(ST, "Connecting to 127.0.0.1:9... failed: Connection refused.", "network", None),
    out(ST, "fatal: unable to access 'https://github.com/x/y/': Could not resolve host: "
        "github.com", "network", None),
    out(ST, "WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError("
        "'<HTTPSConnection object at 0x7f>: Failed to establish a new connection: "
        f"{EAI_AGAIN}')': /simple/six/\nERROR: Could not find a version that satisfies the "
        "requirement six (from versions: none)\n", "network", None),
    # with network, a name the proxy could not resolve is the name's (curl asks the proxy);
    # on the host's own network a refused connection is the other end's
    out(WS, "curl: (6) Could not resolve host: example.com", None, None),
    err(HOSTED, "ConnectionRefusedError", "[Errno 111] Connection refused", None, None),
    # but a raw socket or name lookup of the kernel's own reaches nothing: only the proxy does
    err(WS, "ConnectionRefusedError", "[Errno 111] Connection refused", "network", None),
    err(WS, "gaierror", "[Errno -2] Name or service not known", "network", None),
    err(WS, "OSError", "[Errno 101] Network is unreachable", "network", None),
    err(HOSTED, "OSError", "[Errno 101] Network is unreachable", None, None),
    # a hidden path is named before the network
    (ST, "PermissionError", f"{DENIED} '{H}/.ssh/config'", "curl: (6) Could not resolve host\n",
     "hidden", f"{H}/.ssh/config"),
]
MEMORY = [
    err(WS, "MemoryError", "", "memory", None),
    err(WS, "_ArrayMemoryError", "Unable to allocate 7.45 GiB for an array with shape "
        "(1000000000,) and data type float64", "memory", None),
    err(WS, "OSError", "[Errno 12] Cannot allocate memory", "memory", None),
    err(WS, "RuntimeError", "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
        "not enough memory: you tried to allocate 8000000000 bytes.", "memory", None),
    out(WS, "bash: xmalloc: cannot allocate 1024 bytes", "memory", None),
    out(WS, "bash: fork: Cannot allocate memory", "memory", None),
    err(WS, "OutOfMemoryError", "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; "
        "7.79 GiB total capacity)", None, None),  # the GPU's, not the sandbox's
    err(NO_MEMORY, "MemoryError", "", None, None),
    err(UNLIMITED, "OSError", "[Errno 12] Cannot allocate memory", None, None),
]
PROCESSES = [
    err(WS, "BlockingIOError", "[Errno 11] Resource temporarily unavailable", "processes", None),
    err(WS, "RuntimeError", "can't start new thread", "processes", None),
    out(WS, "bash: fork: retry: Resource temporarily unavailable\n" * 2, "processes", None),
    out(WS, "bash: fork: Resource temporarily unavailable", "processes", None),
    out(WS, "sh: 1: Cannot fork", "processes", None),
    out(WS, "OpenBLAS blas_thread_init: pthread_create failed for thread 1 of 8: Resource "
        "temporarily unavailable", "processes", None),
    out(NO_MEMORY, "bash: fork: Cannot allocate memory", "processes", None),
    out(NO_MEMORY, "fork failed\nerror: Cannot allocate memory\n", "processes", None),
    err(UNLIMITED, "BlockingIOError", "[Errno 11] Resource temporarily unavailable", None, None),
    out(UNLIMITED, "bash: fork: retry: Resource temporarily unavailable", None, None),
    out(UNLIMITED, "bash: fork: Cannot allocate memory", None, None),
]
NOT_CONFINED = [
    err(NONE, "PermissionError", f"{DENIED} '{H}/.ssh/id_rsa'", None, None),
    err(NONE, "OSError", f"{EROFS} '/etc/x'", None, None),
    err(NONE, "MemoryError", "", None, None),
    err(NONE, "ConnectionRefusedError", "[Errno 111] Connection refused", None, None),
]
# fmt: on


@pytest.mark.parametrize(
    ("rules", "name", "value", "stderr", "rule", "path"),
    [
        *HIDDEN,
        *READ_ONLY,
        *PROTECTED,
        *NOT_THE_SANDBOX,
        *NETWORK,
        *MEMORY,
        *PROCESSES,
        *NOT_CONFINED,
    ],
)
def test_failure_of(
    rules: SandboxRules,
    name: str | None,
    value: str | None,
    stderr: str,
    rule: str | None,
    path: str | None,
) -> None:
    found = failure_of(rules, error_name=name, error_value=value, output=stderr)
    expected = None if rule is None else {"rule": rule, "profile": rules.profile, "path": path}
    assert found == expected


OUT = f"{H}/outside"
# What commands run from a cell (`!cmd`, `%%bash`, os.system, subprocess) print when the sandbox
# stops them, copied from real confined kernels (bash 5.2, coreutils 9.1, curl 7.88, wget 1.21,
# git 2.39, pip 25): `!cmd`'s output comes on stdout, the others' on stderr, alike here.
# fmt: off
COMMANDS = [
    (WS, f"cat: {H}/.ssh/id_test: Permission denied", "hidden", f"{H}/.ssh/id_test"),
    (WS, f"head: cannot open '{H}/.ssh/id_test' for reading: Permission denied",
     "hidden", f"{H}/.ssh/id_test"),
    (WS, f"/bin/bash: line 1: {H}/y: Read-only file system", "read_only", f"{H}/y"),
    (WS, f"touch: cannot touch '{OUT}/x': Read-only file system", "read_only", f"{OUT}/x"),
    (WS, f"rm: cannot remove '{OUT}/doomed/f': Read-only file system",
     "read_only", f"{OUT}/doomed/f"),
    (WS, f"mv: inter-device move failed: '{P}/.git/HEAD' to '{H}/HEAD2'; unable to remove "
     "target: Read-only file system", "read_only", f"{H}/HEAD2"),
    # a child Python's traceback ends with its error
    (WS, "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
     f"PermissionError: [Errno 13] Permission denied: '{H}/.ssh/id_test'",
     "hidden", f"{H}/.ssh/id_test"),
    (ST, "Traceback (most recent call last):\n    sock.connect(sa)\n"
     "ConnectionRefusedError: [Errno 111] Connection refused", "network", None),
    # pip's, from its traceback's last line
    (WS, "ERROR: Exception:\nTraceback (most recent call last):\n    os.makedirs(path)\n"
     f"OSError: [Errno 30] Read-only file system: '{OUT}/t'", "read_only", f"{OUT}/t"),
    # git's
    (WS, f"fatal: could not create work tree dir '{OUT}/clone': Read-only file system",
     "read_only", f"{OUT}/clone"),
    (WS, f"error: could not write config file {P}/.git/config: Device or resource busy\n"
     "fatal: could not set 'remote.origin.url' to 'https://example.com/x.git'",
     "protected", f"{P}/.git/config"),
    (ST, "fatal: unable to access 'https://127.0.0.1:9/x.git/': Failed to connect to 127.0.0.1 "
     "port 9 after 0 ms: Couldn't connect to server", "network", None),
    # wget -q's, and curl's warning, which curl wraps at the terminal's width (`!cmd` has one)
    (WS, f"{H}/w: Read-only file system", "read_only", f"{H}/w"),
    (WS, "  % Total    % Received % Xferd  Average Speed   Time    Time     Time  Current\n"
     "  0     0    0     0    0     0      0      0 --:--:-- --:--:-- --:--:--     0Warning: "
     f"Failed to open the file {H}/c: Read-only \nWarning: file system\n"
     "curl: (23) Failure writing output to destination", "read_only", f"{H}/c"),
    (ST, "--2026-12-04 20:35:17--  http://127.0.0.1:9/\n"
     "Connecting to 127.0.0.1:9... failed: Connection refused.", "network", None),
    # a failure among other output
    (WS, f"done\ncat: {H}/.ssh/id_test: Permission denied\nafter", "hidden", f"{H}/.ssh/id_test"),
    # what the sandbox did not cause: a path that does not exist, the host's own permissions
    (WS, "touch: cannot touch '/outside/x': No such file or directory", None, None),
    (WS, "ls: cannot access '/nonexistent/file': No such file or directory", None, None),
    (WS, f"cat: {H}/locked: Permission denied", None, None),
    (WS, "fatal: not a git repository (or any of the parent directories): .git", None, None),
    (WS, "curl: (23) Failure writing output to destination", None, None),
]
# Text that is no command's failure: a Python warning, a log message, matplotlib's note about
# its config dir, a printed exception, git's and pip's advisories when nothing failed.
NOT_FAILURES = [
    (WS, "/tmp/ipykernel_2/4234397077.py:1: UserWarning: could not write: "
     f"{EROFS} '{H}/z'\n  import warnings; warnings.warn(\"could not write: {EROFS} '{H}/z'\")"),
    (WS, f"mkdir -p failed for path {H}/.config/matplotlib: {EROFS} '{H}/.config/matplotlib'\n"
     "Matplotlib created a temporary cache directory at /tmp/matplotlib-sln4arlj because there "
     f"was an issue with the default path ({H}/.config/matplotlib); it is highly recommended to "
     "set the MPLCONFIGDIR environment variable to a writable directory, in particular to speed "
     "up the import of Matplotlib and to better support multiprocessing."),
    (WS, f"WARNING:root:could not save: {EROFS} '{H}/state'"),
    (WS, f"{DENIED} '{H}/.ssh/id_rsa'"),  # print(e)
    (WS, f"warning: unable to access '{H}/.ssh/config': Permission denied"),
    (ST, "WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError("
     f"'<HTTPSConnection object at 0x7f>: Failed to establish a new connection: {EAI_AGAIN}')'"),
    (WS, "/x/lib.py:7: ResourceWarning: can't start new thread; running in this one"),
]
# fmt: on


@pytest.mark.parametrize(("rules", "output", "rule", "path"), COMMANDS)
def test_commands_error_lines(
    rules: SandboxRules, output: str, rule: str | None, path: str | None
) -> None:
    found = failure_of(rules, error_name=None, error_value=None, output=output + "\n", cwd=Path(P))
    expected = None if rule is None else {"rule": rule, "profile": rules.profile, "path": path}
    assert found == expected


@pytest.mark.parametrize(("rules", "output"), NOT_FAILURES)
def test_warnings_and_logs_are_no_failure(rules: SandboxRules, output: str) -> None:
    assert failure_of(rules, error_name=None, error_value=None, output=output + "\n") is None
    # nor do they explain a cell's own error
    found = failure_of(
        rules, error_name="ZeroDivisionError", error_value="division by zero", output=output + "\n"
    )
    assert found is None


@pytest.mark.parametrize(
    ("output", "lines"),
    [
        ("done\ncat: /x: Permission denied\nafter", ["cat: /x: Permission denied"]),
        ("warning: a\nfatal: b\nhint: c\nplain", ["warning: a", "fatal: b", "hint: c"]),
        ("warning: a\nhint: c", []),  # advisories alone: nothing failed
        ("{'status': 'Connection refused'}\nPATH=/usr/bin:/bin", []),  # printed values
        ("/x.py:2: UserWarning: can't start new thread", []),
        (
            "  File \"x.py\", line 1\nOSError: [Errno 30] Read-only file system: '/x'",
            ["OSError: [Errno 30] Read-only file system: '/x'"],
        ),
        (
            "  0  0 --:--:--     0Warning: Failed to open the file /x: Read-only \n"
            "Warning: file system\ncurl: (23) Failure writing output to destination",
            [
                "Warning: Failed to open the file /x: Read-only file system",
                "curl: (23) Failure writing output to destination",
            ],
        ),
    ],
)
def test_command_errors(output: str, lines: list[str]) -> None:
    assert command_errors(output) == lines


@pytest.fixture
def host_tmp_file() -> Iterator[Path]:
    """A file in the host's /tmp (which a kernel under bubblewrap cannot see)."""
    fd, name = tempfile.mkstemp(prefix="loomgate-host-tmp-", dir="/tmp")
    os.close(fd)
    try:
        yield Path(name)
    finally:
        Path(name).unlink()


@pytest.mark.parametrize(
    ("message", "own_tmp", "writable", "claimed"),
    [
        ("FileNotFoundError: [Errno 2] No such file or directory: '{}'", True, (), True),
        ("cat: {}: No such file or directory", True, (), True),
        ("ls: cannot access '{}': No such file or directory", True, (), True),
        ("python3: can't open file '{}': [Errno 2] No such file or directory", True, (), True),
        # without a /tmp of its own (Landlock alone) the host's is the kernel's: not claimed
        ("cat: {}: No such file or directory", False, (), False),
        # a /tmp path the profile makes writable is the host's own
        ("cat: {}: No such file or directory", True, ("/tmp",), False),
        # a path the host does not have either: the same note, so that it tells nothing of
        # what the host's /tmp holds
        ("cat: {}-gone: No such file or directory", True, (), True),
        ("cat: /tmp: No such file or directory", True, (), False),
    ],
)
def test_a_missing_path_of_the_hosts_tmp(
    host_tmp_file: Path, message: str, own_tmp: bool, writable: tuple[str, ...], claimed: bool
) -> None:
    rules = replace(WS, writable=tuple(Path(w) for w in writable))
    stderr = message.format(host_tmp_file) + "\n"
    found = failure_of(rules, error_name=None, error_value=None, output=stderr, own_tmp=own_tmp)
    path = message.format(host_tmp_file).split("'")[-2] if "'" in message else None
    named = path or message.format(host_tmp_file).split(": ")[1]
    expected = {"rule": "own_tmp", "profile": "workspace", "path": named}
    assert found == (expected if claimed else None)


@pytest.mark.parametrize(
    ("name", "content", "protected", "rule"),
    [
        (".mcp.json", False, (".mcp.json",), "protected"),  # its placeholder
        (".mcp.json", False, (), None),  # taken out: not the sandbox's
        (".vscode", True, (".vscode",), None),  # the person's dir: the cell's own mistake
        ("src", False, (".mcp.json",), None),
    ],
)
def test_is_a_directory_is_the_sandboxs_only_on_a_placeholder(
    tmp_path: Path, name: str, content: bool, protected: tuple[str, ...], rule: str | None
) -> None:
    (tmp_path / name).mkdir()
    if content:
        (tmp_path / name / "settings.json").write_text("{}")
    rules = replace(WS, writable=(tmp_path,), protected=protected)
    path = tmp_path / name
    expected = rule and {"rule": rule, "profile": "workspace", "path": str(path)}
    for name_, value, stderr in (
        ("IsADirectoryError", f"[Errno 21] Is a directory: '{path}'", ""),
        (None, None, f"sh: 1: cannot create {name}: Is a directory\n"),
    ):
        found = failure_of(rules, error_name=name_, error_value=value, output=stderr, cwd=tmp_path)
        assert found == expected


def test_a_venv_inside_the_writable_dir_is_the_environment(tmp_path: Path) -> None:
    """The kernel's own interpreter's venv is read-only in it, also when its rules do not
    name it (a kernel spec other than the gateway's Python)."""
    project = tmp_path / "project"
    (project / "env" / "lib").mkdir(parents=True)
    (project / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    rules = replace(WS, writable=(project,))
    for path, rule in ((project / "env/lib/x.pth", "protected"), (project / "src/x", None)):
        value = f"{EROFS} '{path}'"
        found = failure_of(rules, error_name="OSError", error_value=value, output="")
        assert found == (rule and {"rule": rule, "profile": "workspace", "path": str(path)})


@pytest.mark.parametrize(
    ("cwd", "stderr", "rule", "path"),
    [
        (H, "cat: .ssh/id_rsa: Permission denied\n", "hidden", f"{H}/.ssh/id_rsa"),
        (
            P,
            "touch: cannot touch '.git/hooks/x': Read-only file system\n",
            "protected",
            f"{P}/.git/hooks/x",
        ),
        (f"{H}/project", "cat: ../.aws/config: Permission denied\n", "hidden", f"{H}/.aws/config"),
        (f"{H}/project", "cat: notes.txt: Permission denied\n", None, None),
        # Where a relative path lies is not known: read-only holds whatever it is.
        (f"{H}/project", "touch: cannot touch 'x': Read-only file system\n", "read_only", None),
    ],
)
def test_relative_paths_with_the_kernels_cwd(
    cwd: str, stderr: str, rule: str | None, path: str | None
) -> None:
    found = failure_of(WS, error_name=None, error_value=None, output=stderr, cwd=Path(cwd))
    expected = None if rule is None else {"rule": rule, "profile": "workspace", "path": path}
    assert found == expected


def test_symlinks_to_hidden_paths_are_followed(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    (tmp_path / "link").symlink_to(keys)
    rules = replace(WS, hidden=(keys.resolve(),))
    found = failure_of(
        rules,
        error_name="PermissionError",
        error_value=f"{DENIED} '{tmp_path}/link/id_rsa'",
        output="",
    )
    assert found == {"rule": "hidden", "profile": "workspace", "path": f"{tmp_path}/link/id_rsa"}


@pytest.mark.parametrize(
    ("head", "path"),
    [
        ("cat: /x", "/x"),
        ("cat: /a b", "/a b"),
        ("tee: ./my file", "./my file"),
        ("tee: ~/my file", "~/my file"),
        ("cat: notes.txt", "notes.txt"),
        ("bash: /tmp/run.sh: out.txt", "out.txt"),  # the segment after the last ": "
        ("cat /x", "/x"),
        ("sh: 1: cannot create /a b", "/a b"),
        ("Failed to open the file /tmp/a /b", "/tmp/a /b"),
        ("touch: cannot touch '/x'", "/x"),
        ("mv: a; failed '/x'; unable to remove target", "/x"),  # before the last "; "
        ("mkdir: cannot create directory ‘/d’", "/d"),
        ("cat: ", None),
        ("", None),
    ],
)
def test_path_before(head: str, path: str | None) -> None:
    assert path_before(head) == path


@pytest.mark.parametrize(
    ("literal", "text"),
    [
        ("'/x'", "/x"),
        ('"it\'s"', "it's"),
        ("'a\\'b'", "a'b"),
        ("''", ""),
        ("'bad\\x'", "bad\\x"),  # not a literal Python reads: the text between the quotes
    ],
)
def test_unquote(literal: str, text: str) -> None:
    assert unquote(literal) == text


# ---- Mutation testing (bench/mutation.py, issue 42): what the tables above leave open, each
# test failing on a mutant of rule_failures.py that lived without it. ----
@pytest.mark.parametrize(
    ("head", "path"),
    [
        ("x: '/p'; b '/q'; c", "/q"),  # two clauses: the quoted path before the last
        ("tool: '/p'; see '/q' first", "/p"),  # not the one inside the clause
    ],
)
def test_path_before_a_tools_clause(head: str, path: str) -> None:
    assert path_before(head) == path


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("warning: adding embedded repository", "advisory"),
        ("hint: use --force", "advisory"),
        ("fatal: not a git repository", "error"),
        ("", None),
        ("x", None),
        (" cat: /x: Permission denied", None),  # indented: part of something else
    ],
)
def test_the_kind_of_a_commands_line(line: str, kind: str | None) -> None:
    assert line_kind(line) == kind
    assert command_errors(f"{line}\n\nfatal: end\n") == [*([line] if kind else []), "fatal: end"]


def test_only_an_empty_dir_here_is_empty(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "full").mkdir()
    (tmp_path / "full/f").write_text("")
    found = [empty_dir(tmp_path / name) for name in ("empty", "full", "full/f", "missing")]
    assert found == [True, False, False, False]


@pytest.mark.parametrize(
    ("value", "rule", "path"),
    [
        # only the reasons a hidden path gives make it the hidden rule
        (f"[Errno 16] Device or resource busy: '{H}/.ssh'", None, None),
        (f"[Errno 21] Is a directory: '{H}/.ssh/x'", None, None),
        # and only those a read-only one gives make a protected path the protected rule
        (f"[Errno 13] Permission denied: '{P}/.git/config'", None, None),
        (f"[Errno 16] Device or resource busy: '{P}/.git'", "protected", f"{P}/.git"),
    ],
)
def test_a_path_rule_is_claimed_only_for_its_reasons(
    value: str, rule: str | None, path: str | None
) -> None:
    found = failure_of(WS, error_name="OSError", error_value=value, output="")
    assert found == (rule and {"rule": rule, "profile": "workspace", "path": path})


def test_a_rename_onto_a_placeholder_is_the_sandboxs(tmp_path: Path) -> None:
    (tmp_path / ".vscode").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src/a.py").write_text("")
    rules = replace(WS, writable=(tmp_path,), protected=(".vscode",))
    value = f"[Errno 21] Is a directory: '{tmp_path / '.vscode'}' -> '{tmp_path / 'src'}'"
    found = failure_of(rules, error_name="IsADirectoryError", error_value=value, output="")
    assert found == {"rule": "protected", "profile": "workspace", "path": str(tmp_path / ".vscode")}


def test_a_writable_dir_that_is_a_venv_is_writable(tmp_path: Path) -> None:
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    rules = replace(WS, writable=(tmp_path,))
    value = f"{EROFS} '{tmp_path / 'notes.txt'}'"
    assert failure_of(rules, error_name="OSError", error_value=value, output="") is None


def test_a_kernel_has_its_own_tmp_unless_told(host_tmp_file: Path) -> None:
    stderr = f"cat: {host_tmp_file}: No such file or directory\n"
    found = failure_of(WS, error_name=None, error_value=None, output=stderr)
    assert found == {"rule": "own_tmp", "profile": "workspace", "path": str(host_tmp_file)}


def test_a_read_only_tree_in_a_writable_dir_that_is_no_venv_is_protected(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    rules = SandboxRules(
        "workspace",
        True,
        (project,),
        (),
        PUBLIC,
        None,
        None,
        protected=(),
        read_only=(project / "src",),  # an editable install's source tree: no pyvenv.cfg
    )
    assert protected(rules, project / "src" / "loomgate" / "x.py")
    assert not protected(rules, project / "notes.txt")
