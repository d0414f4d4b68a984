"""Which sandbox rule a failed cell ran into, read from its error and stderr, so the reply can
name it and the model stops retrying.

Only a failure the kernel's rules explain is claimed: a path error names `hidden` when the path
lies inside a hidden path (whatever the error: the sandbox makes those unreadable), and
`read_only` only for "Read-only file system" (EROFS, what the sandbox's read-only file system
gives) on a path outside the writable set. "Permission denied" elsewhere is the file's own
permissions, which hold without a sandbox too (`/etc/shadow`), so it is not claimed. Network
errors are claimed only when the rules have no network, limits only when the rules set them.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from loomgate.gateway.sandbox.profiles import SandboxRules, lies_inside, resolved
from loomgate.shared.wire import SandboxFailure, SandboxRule

__all__ = ["failure_of"]

EACCES = "Permission denied"
EPERM = "Operation not permitted"
EROFS = "Read-only file system"
EXDEV = "Invalid cross-device link"  # a rename out of a writable dir, a mount of its own
PATH_REASONS = (EACCES, EPERM, EROFS, EXDEV)
READ_ONLY_REASONS = (EROFS, EXDEV)

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
# Only the end of a long stderr is read: the failure that ended the cell is there.
STDERR_TAIL = 65536

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
    stderr: str,
    cwd: Path | None = None,
) -> SandboxFailure | None:
    """Return the sandbox rule a failed cell ran into, None when its rules do not explain it.

    `error_name`/`error_value`: the cell's error (ename, evalue), if it raised; `stderr`: what
    it wrote to stderr (its subprocesses' messages); `cwd`: the kernel's working directory, for
    relative paths in messages (None: such a path is judged without it).
    """
    if not rules.confined:
        return None
    lines = [*(error_value or "").splitlines(), *reversed(stderr[-STDERR_TAIL:].splitlines())]
    for denial in path_denials(lines):
        found = path_failure(rules, denial, cwd)
        if found is not None:
            return found
    rule = other_rule(rules, error_name or "", lines)
    return None if rule is None else {"rule": rule, "profile": rules.profile, "path": None}


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
    if not segment or segment.startswith(("/", ".", "~")):
        return segment or None
    if " /" in segment:  # "cannot create /x", "Failed to open the file /x"
        return segment[segment.index(" /") + 1 :]
    return segment.split()[-1]


def path_failure(
    rules: SandboxRules, denial: PathDenial, cwd: Path | None
) -> SandboxFailure | None:
    """Return the rule a path error ran into, None if the rules do not explain it."""
    absolute = [Path(os.path.normpath(t)) for t in denial.paths if t.startswith("/")]
    relative = [t for t in denial.paths if not t.startswith("/")]
    placed = [Path(os.path.normpath(cwd / t)) for t in relative] if cwd is not None else []
    for path in (*absolute, *placed):
        if any(lies_inside(p, h) for p in forms(path) for h in rules.hidden):
            return {"rule": "hidden", "profile": rules.profile, "path": str(path)}
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


def forms(path: Path) -> tuple[Path, ...]:
    """Return `path`, and `path` with its symlinks resolved where they exist here."""
    return (path, resolved(path))


def other_rule(rules: SandboxRules, error_name: str, lines: list[str]) -> SandboxRule | None:
    """Return the network, processes or memory rule the error and messages show, if any."""
    text = "\n".join(lines)
    if not rules.network and any(sign in text for sign in NETWORK_SIGNS):
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
