"""Which sandbox rule a failed cell ran into, read from its error and output, so the reply can
name it and the model stops retrying (sandbox/failures/cell_failures.py asks, at the cell's end).

Only a failure the kernel's rules explain is claimed: a path error names `hidden` when the path
lies inside a hidden path (whatever the error: the sandbox makes those unreadable), `protected`
when a write (or a read of a placeholder: "Is a directory") failed on a path kept read-only
inside a writable one (its `.git`, a protected name, the environment the kernel runs on or
loomgate's installation), `read_only` only for "Read-only file system" (EROFS, what the
sandbox's read-only file system gives) on a path outside the writable set, and `own_tmp` for "No
such file or directory" on any path under /tmp outside the writable set (the sandbox's /tmp is its
own), whether the host has that path or not: the note never tells what the host's /tmp holds.
"Permission denied" elsewhere is the file's own permissions, which hold without a sandbox too
(`/etc/shadow`), so it is not claimed. Network errors are claimed only when the rules have no
network, limits only when the rules set them.

Notes belong to failures. What is read: the cell's error, and the lines of its output in which a
command run from it (`!cmd`, `%%bash`, os.system, subprocess) says it failed (`command_errors`:
"cat: /x: Permission denied", git's "fatal: …", pip's "ERROR: …", a child Python's last
traceback line), with the advisories around them ("warning: …") when one did. Never a Python
warning, a log message or other printed text: a cell that only warns (matplotlib about its
config dir) failed in nothing, and a warning does not explain a cell's own error.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from loomgate.gateway.sandbox.policy.installation import installation_roots
from loomgate.gateway.sandbox.policy.profiles import SandboxRules, lies_inside, resolved
from loomgate.gateway.sandbox.policy.protected_names import GIT
from loomgate.shared.wire import SandboxFailure, SandboxRule

__all__ = ["command_errors", "failure_of"]

EACCES = "Permission denied"
EPERM = "Operation not permitted"
EROFS = "Read-only file system"
EXDEV = "Invalid cross-device link"  # a rename out of a writable dir, a mount of its own
EBUSY = "Device or resource busy"  # renaming or removing a mount point (a protected path)
EISDIR = "Is a directory"  # writing a protected name's placeholder (an empty dir)
ENOENT = "No such file or directory"
PATH_REASONS = (EACCES, EPERM, EROFS, EXDEV, EBUSY, EISDIR, ENOENT)
HIDDEN_REASONS = (EACCES, EPERM, EROFS, EXDEV)
READ_ONLY_REASONS = (EROFS, EXDEV)
PROTECTED_REASONS = (EROFS, EXDEV, EBUSY, EISDIR)
TMP = Path("/tmp")
VENV_CONFIG = "pyvenv.cfg"

# What a failed connection or name lookup says in Python, requests/urllib3/httpx/aiohttp, curl,
# wget and git when there is no network.
NETWORK_SIGNS = (
    "Network is unreachable",
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "Could not resolve host",
    "unable to resolve host address",
    "Failed to resolve",
    "Connection refused",
    "Couldn't connect to server",
    "Cannot assign requested address",
    "No route to host",
)
# What a raw socket or name lookup says inside a network namespace of its own (an empty
# loopback, no route, no resolver): the clients that read the proxy variables never say it.
UNREACHABLE = (
    "Network is unreachable",
    "Connection refused",
    "Temporary failure in name resolution",
    "Name or service not known",
)
MEMORY_ERRORS = frozenset({"MemoryError", "_ArrayMemoryError", "ArrayMemoryError"})
ENOMEM = re.compile(
    r"Cannot allocate memory|can't allocate memory|not enough memory|std::bad_alloc"
    r"|xmalloc: cannot allocate"
)
EAGAIN = "Resource temporarily unavailable"
# A process or thread that could not be started, from Python, the shells and pthreads.
SPAWN_FAILURE = re.compile(
    r"can't start new thread|Cannot fork|fork: retry|\bfork\b.*"
    + EAGAIN
    + r"|pthread_create failed|"
    + EAGAIN
    + r".*\b(?:fork|thread)",
)
FORK = re.compile(r"\bfork\b|\bCannot fork\b|\bclone\b")
FORK_FAILED = re.compile(r"\bfork failed\b")
# Only the end of a long output is read: the failure that ended the cell is there.
OUTPUT_TAIL = 65536

# A command's own line about its failure: its name or path, then ": " ("cat: /x: …",
# "/bin/bash: line 1: /x: …", git's "fatal: …", pip's "ERROR: …", "curl: (6) …", a child
# Python's "OSError: [Errno 30] …", wget -q's "/x: Read-only file system"). A Python warning's
# head ("/x.py:3: UserWarning: ") has no space after its first colon, a log message ("mkdir -p
# failed for path …", "WARNING:root:…") no name before one, a printed dict ("{'a': 1}") none.
PROGRAM_LINE = re.compile(r"(?P<name>[\w./+-]+): ")
PYTHON_WARNING = re.compile(r"\S.*:\d+: \w*Warning: ")
# Program lines that only advise (git's "warning:" and "hint:", pip's "WARNING:", curl's
# "Warning:"): read only when a command in the same output failed.
ADVISORIES = frozenset(
    form
    for word in ("warning", "hint", "note", "notice", "info", "debug")
    for form in (word, word.capitalize(), word.upper())
)
# wget's own forms: "Cannot write to ‘/x’ (Read-only file system).", "Connecting to
# 1.1.1.1:80... failed: Network is unreachable."
WGET_LINE = re.compile(r"Cannot write to |\S.*\.\.\. failed: ")
# curl wraps a warning at the terminal's width (`!cmd` runs in a pty), each piece after
# "Warning: ", the first after its progress meter ("  0     0 … --:--:--     0Warning: …").
CURL_WARNING = "Warning: "
CURL_METER = re.compile(r"[\d\s.:kMG-]+(?=Warning: )")

_QUOTED = r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\""""
# Python's OSError: "[Errno 30] Read-only file system: '/a'" (and "… '/a' -> '/b'").
PYTHON_FORM = re.compile(
    rf"\[Errno\s+\d+\]\s+(?P<reason>{'|'.join(PATH_REASONS)}):\s+(?P<a>{_QUOTED})"
    rf"(?:\s+->\s+(?P<b>{_QUOTED}))?"
)
# The tools' and shells': "touch: cannot touch '/x': Read-only file system",
# "cat: /x: Permission denied", "python3: can't open file '/x': [Errno 13] Permission denied".
TOOL_FORM = re.compile(
    rf"^(?P<head>.*?)(?::\s*\[Errno\s+\d+\]\s*|:\s+)(?P<reason>{'|'.join(PATH_REASONS)})\b"
)
# wget's: "Cannot write to ‘/x’ (Read-only file system)."
PARENTHESISED_FORM = re.compile(
    rf"(?P<q>‘[^’]*’|'[^']*'|\"[^\"]*\")\s+\((?P<reason>{'|'.join(PATH_REASONS)})\)"
)
TRAILING_QUOTED = re.compile(r"(?:'([^']*)'|\"((?:[^\"\\]|\\.)*)\"|‘([^’]*)’)\s*$")
QUOTED_IN = re.compile(r"(?:'([^']+)'|\"([^\"]+)\"|‘([^’]+)’)")


@dataclass(frozen=True)
class PathDenial:
    """A path error as a message gives it: the reason and the paths (as written)."""

    reason: str
    paths: tuple[str, ...]


def failure_of(
    rules: SandboxRules,
    *,
    error_name: str | None,
    error_value: str | None,
    output: str,
    cwd: Path | None = None,
    own_tmp: bool = True,
) -> SandboxFailure | None:
    """Return the sandbox rule a failed cell ran into, None when its rules do not explain it.

    `error_name`/`error_value`: the cell's error (ename, evalue), if it raised; `output`: what
    it wrote to stdout and stderr, of which only its commands' error lines are read
    (`command_errors`); `cwd`: the kernel's working directory, for relative paths in messages
    (None: such a path is judged without it); `own_tmp`: whether the mechanism gives the kernel
    a /tmp of its own (bubblewrap does; Landlock alone does not).
    """
    if not rules.confined:
        return None
    errors = command_errors(output[-OUTPUT_TAIL:])
    lines = [*(error_value or "").splitlines(), *reversed(errors)]
    for denial in path_denials(lines):
        found = path_failure(rules, denial, cwd, own_tmp=own_tmp)
        if found is not None:
            return found
    rule = other_rule(rules, error_name or "", lines)
    return None if rule is None else {"rule": rule, "profile": rules.profile, "path": None}


def command_errors(output: str) -> list[str]:
    """Return the lines of `output` in which commands say they failed, in order, with the
    advisories among them when one did; none when no command failed."""
    lines = unwrapped(output.splitlines())
    kinds = [line_kind(line) for line in lines]
    if "error" not in kinds:
        return []
    return [line for line, kind in zip(lines, kinds, strict=True) if kind is not None]


def line_kind(line: str) -> Literal["error", "advisory"] | None:
    """Return whether `line` is a command's error line, its advisory, or neither."""
    if not line or line[0].isspace() or PYTHON_WARNING.match(line):
        return None
    program = PROGRAM_LINE.match(line)
    if program is not None:
        return "advisory" if program.group("name") in ADVISORIES else "error"
    failed_to_start = SPAWN_FAILURE.search(line) or FORK_FAILED.search(line)
    if WGET_LINE.match(line) or failed_to_start or ENOMEM.search(line):
        return "error"
    return None


def unwrapped(lines: list[str]) -> list[str]:
    """Return `lines` with each warning curl wrapped over several lines on one, without the
    progress meter before it."""
    out: list[str] = []
    for line in lines:
        if line.startswith(CURL_WARNING) and out and out[-1].startswith(CURL_WARNING):
            out[-1] = f"{out[-1].rstrip()} {line.removeprefix(CURL_WARNING)}"
            continue
        meter = CURL_METER.match(line)
        out.append(line[meter.end() :] if meter is not None else line)
    return out


def path_denials(lines: list[str]) -> Iterator[PathDenial]:
    """Yield the path errors in `lines`, in order."""
    for line in lines:
        python = PYTHON_FORM.search(line)
        if python is not None:
            paths = [python.group("a"), python.group("b")]
            yield PathDenial(python.group("reason"), tuple(unquote(p) for p in paths if p))
            continue
        parenthesised = PARENTHESISED_FORM.search(line)
        if parenthesised is not None:
            yield PathDenial(parenthesised.group("reason"), (parenthesised.group("q")[1:-1],))
            continue
        tool = TOOL_FORM.search(line)
        if tool is not None:
            path = path_before(tool.group("head"))
            yield PathDenial(tool.group("reason"), (path,) if path else ())


def unquote(literal: str) -> str:
    """Return the text of a Python string literal as repr() writes one."""
    try:
        return str(ast.literal_eval(literal))  # a quoted literal: always a str
    except (ValueError, SyntaxError):
        return literal[1:-1]


def path_before(head: str) -> str | None:
    """Return the path a tool's message names just before its reason."""
    # "mv: inter-device move failed: 'a' to '/x'; unable to remove target": the path is
    # the quoted one before the clause.
    for part in (head, head.rpartition("; ")[0]):
        quoted = TRAILING_QUOTED.search(part)
        if quoted is not None:
            return next(g for g in quoted.groups() if g is not None)
    segment = head.rpartition(": ")[2].strip()
    inner = list(QUOTED_IN.finditer(segment))  # "cannot open '/x' for reading"
    if inner:
        return next(g for g in inner[-1].groups() if g is not None)
    if not segment or segment.startswith(("/", ".", "~")):
        return segment or None
    if " /" in segment:  # "cannot create /x", "Failed to open the file /x"
        return segment[segment.index(" /") + 1 :]
    return segment.split()[-1]


def path_failure(
    rules: SandboxRules, denial: PathDenial, cwd: Path | None, *, own_tmp: bool = True
) -> SandboxFailure | None:
    """Return the rule a path error ran into, None if the rules do not explain it."""
    absolute = [Path(os.path.normpath(t)) for t in denial.paths if t.startswith("/")]
    relative = [t for t in denial.paths if not t.startswith("/")]
    placed = [Path(os.path.normpath(cwd / t)) for t in relative] if cwd is not None else []
    if denial.reason == ENOENT:
        return host_tmp_failure(rules, absolute) if own_tmp else None
    for path in (*absolute, *placed) if denial.reason in HIDDEN_REASONS else ():
        if any(lies_inside(p, h) for p in forms(path) for h in rules.hidden):
            return {"rule": "hidden", "profile": rules.profile, "path": str(path)}
    for path in (*reversed(absolute), *placed) if denial.reason in PROTECTED_REASONS else ():
        # "Is a directory" is the sandbox's only on a placeholder (an empty dir): on a dir of
        # the person's it is the cell's own mistake.
        if denial.reason == EISDIR and not empty_dir(path):
            continue
        if any(protected(rules, p) for p in forms(path)):
            return {"rule": "protected", "profile": rules.profile, "path": str(path)}
    if denial.reason not in READ_ONLY_REASONS:
        return None
    if denial.reason == EXDEV:
        # Across mounts only the target tells: a rename from the kernel's own temp dir into
        # the writable set fails so too.
        target = Path(os.path.normpath(denial.paths[-1])) if denial.paths else None
        if target is None or len(denial.paths) != 2 or not target.is_absolute():
            return None
        absolute = [target]
    for path in reversed(absolute):  # a rename's target first
        if not any(lies_inside(p, w) for p in forms(path) for w in rules.writable):
            return {"rule": "read_only", "profile": rules.profile, "path": str(path)}
    if relative or not denial.paths:
        # Where a relative path lies is not known (the kernel may have changed directory):
        # the sandbox's read-only file system is what gives this error.
        return {"rule": "read_only", "profile": rules.profile, "path": None}
    return None


def protected(rules: SandboxRules, path: Path) -> bool:
    """Return whether `path` lies in what stays read-only inside a writable path: a `.git`,
    a protected name, or an environment (one the rules name, loomgate's installation, or a dir
    holding a pyvenv.cfg: the sandbox makes the kernel's interpreter's venv read-only too)."""
    top = next((w for w in rules.writable if lies_inside(path, w)), None)
    if top is None:
        return False
    if any(lies_inside(path, top / name) for name in (GIT, *rules.protected)):
        return True
    if any(lies_inside(path, root) for root in (*rules.read_only, *installation_roots())):
        return True
    return any(
        (parent / VENV_CONFIG).is_file()
        for parent in (path, *path.parents)
        if lies_inside(parent, top) and parent != top
    )


def empty_dir(path: Path) -> bool:
    """Return whether `path` is an empty directory here."""
    try:
        with os.scandir(path) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def host_tmp_failure(rules: SandboxRules, paths: list[Path]) -> SandboxFailure | None:
    """Return the `own_tmp` rule for a path under /tmp that the kernel did not find (its /tmp is
    the sandbox's own), None for any other missing path; never asking whether the host has it."""
    for path in paths:
        if (
            lies_inside(path, TMP)
            and path != TMP
            and not any(lies_inside(path, w) for w in rules.writable)
        ):
            return {"rule": "own_tmp", "profile": rules.profile, "path": str(path)}
    return None


def forms(path: Path) -> tuple[Path, ...]:
    """Return `path`, and `path` with its symlinks resolved where they exist here."""
    return (path, resolved(path))


def other_rule(rules: SandboxRules, error_name: str, lines: list[str]) -> SandboxRule | None:
    """Return the network, processes or memory rule the error and messages show, if any."""
    text = "\n".join(lines)
    if rules.network.off and any(sign in text for sign in NETWORK_SIGNS):
        return "network"
    if rules.network.proxied and any(sign in text for sign in UNREACHABLE):
        return "network"
    spawn = (
        error_name == "BlockingIOError"  # EAGAIN from fork (also a non-blocking socket's)
        or SPAWN_FAILURE.search(text) is not None
    )
    if rules.processes is not None and spawn:
        return "processes"
    out_of_memory = error_name in MEMORY_ERRORS or ENOMEM.search(text) is not None
    if out_of_memory:
        if rules.memory is not None:
            return "memory"
        if rules.processes is not None and FORK.search(text):
            return "processes"
    return None
