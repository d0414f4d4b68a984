"""Landlock through ctypes: the kernel's ABI version and the access rights each ABI has; scoping
the calling thread so it can neither reach abstract unix sockets nor signal processes outside its
domain; and restricting it to a whole `Ruleset` (files, TCP, scopes)."""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FILE_RIGHTS",
    "NET_ABI",
    "READ",
    "SCOPES_ABI",
    "WRITE",
    "LandlockUnavailable",
    "Ruleset",
    "abi_version",
    "fs_rights",
    "restrict",
    "restrict_scopes",
]

# landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: the same numbers on every
# architecture that has them (they came after the syscall table was unified at 424).
SYSCALLS = {"x86_64": 444, "aarch64": 444, "arm64": 444}
CREATE_RULESET_VERSION = 1 << 0
ADD_RULE_OFFSET = 1  # landlock_add_rule is landlock_create_ruleset + 1
RESTRICT_SELF_OFFSET = 2  # landlock_restrict_self is landlock_create_ruleset + 2
PR_SET_NO_NEW_PRIVS = 38
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1
SCOPES_ABI = 6  # the first ABI with `scoped`
NET_ABI = 4  # the first ABI with TCP bind and connect rules
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2

# File-system access rights (include/uapi/linux/landlock.h), with the ABI that brought each.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: link or rename into another dir
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5: ioctl on a device file
ABI_1_RIGHTS = (1 << 13) - 1
# The rights a rule on a file (not a dir) may carry.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ = EXECUTE | READ_FILE | READ_DIR
# Writing a tree: its files, and making and removing entries (no device nodes).
WRITE = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
)
BIND_TCP = 1 << 0
CONNECT_TCP = 1 << 1


class RulesetAttr(ctypes.Structure):
    """struct landlock_ruleset_attr as of ABI 6 (older ABIs read its beginning)."""

    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class PathBeneathAttr(ctypes.Structure):
    """struct landlock_path_beneath_attr (packed)."""

    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


class NetPortAttr(ctypes.Structure):
    """struct landlock_net_port_attr."""

    _fields_ = (("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64))


class LandlockUnavailable(OSError):
    """The kernel cannot apply these Landlock rules (no Landlock, or too old an ABI)."""


@dataclass(frozen=True)
class Ruleset:
    """A whole Landlock domain: every file-system right of `abi` handled, and allowed only
    beneath `paths`; TCP handled when `tcp_ports` is given (connect only to those ports, bind
    only to `bind_ports`); abstract unix sockets and signals scoped when `scopes`."""

    abi: int
    paths: tuple[tuple[Path, int], ...]  # (path, rights allowed beneath it)
    tcp_ports: tuple[int, ...] | None = None  # None: TCP is not handled (the network is open)
    scopes: bool = False
    bind_ports: tuple[int, ...] = ()  # a kernel's own ports (one that takes only TCP)


def libc() -> ctypes.CDLL:
    """Return the C library, with errno kept for each call."""
    return ctypes.CDLL(None, use_errno=True)


def create_ruleset_number() -> int | None:
    """Return landlock_create_ruleset's syscall number here, or None on another architecture."""
    system = os.uname()
    return SYSCALLS.get(system.machine) if system.sysname == "Linux" else None


def abi_version() -> int:
    """Return the kernel's Landlock ABI version, 0 when Landlock is missing or disabled."""
    number = create_ruleset_number()
    if number is None:
        return 0
    version = libc().syscall(
        number, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION)
    )
    return max(int(version), 0)


def fs_rights(abi: int) -> int:
    """Return every file-system access right Landlock ABI `abi` handles (0 without Landlock)."""
    if abi < 1:
        return 0
    rights = ABI_1_RIGHTS
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def restrict_scopes() -> None:
    """Forbid the calling thread and its future children to connect to abstract unix sockets or
    signal processes outside its Landlock domain (sets no_new_privs, which the domain needs)."""
    version = abi_version()
    if version < SCOPES_ABI:
        raise LandlockUnavailable(
            f"Landlock scopes need ABI {SCOPES_ABI} (Linux 6.12 or later); this kernel reports "
            f"{'no Landlock' if version == 0 else f'ABI {version}'}"
        )
    apply(RulesetAttr(0, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL), SCOPES_ABI, ())


def restrict(ruleset: Ruleset) -> None:
    """Restrict the calling thread and its future children to `ruleset` (sets no_new_privs).
    A path gone since the ruleset was made is left out: nothing is allowed there."""
    if ruleset.abi < 1 or abi_version() < ruleset.abi:
        raise LandlockUnavailable(
            f"this ruleset needs Landlock ABI {ruleset.abi}; this kernel reports "
            f"{abi_version() or 'no Landlock'}"
        )
    tcp = ruleset.tcp_ports is not None and ruleset.abi >= NET_ABI
    scoped = ruleset.scopes and ruleset.abi >= SCOPES_ABI
    attr = RulesetAttr(
        fs_rights(ruleset.abi),
        BIND_TCP | CONNECT_TCP if tcp else 0,
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if scoped else 0,
    )
    ports = ruleset.tcp_ports if tcp and ruleset.tcp_ports else ()
    apply(attr, ruleset.abi, ruleset.paths, ports, ruleset.bind_ports if tcp else ())


def attr_size(abi: int) -> int:
    """Return the size of struct landlock_ruleset_attr that ABI `abi` knows."""
    if abi >= SCOPES_ABI:
        return ctypes.sizeof(RulesetAttr)
    return 16 if abi >= NET_ABI else 8


def apply(
    attr: RulesetAttr,
    abi: int,
    paths: Sequence[tuple[Path, int]],
    ports: Sequence[int] = (),
    bind_ports: Sequence[int] = (),
) -> None:
    """Create a ruleset handling what `attr` says, allow `paths`, connecting to TCP `ports` and
    binding `bind_ports` in it, and restrict the calling thread to it."""
    number = create_ruleset_number()
    if number is None:
        raise LandlockUnavailable("Landlock is a Linux interface; this system has none")
    c = libc()
    if c.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise failure("prctl(PR_SET_NO_NEW_PRIVS)")
    ruleset = c.syscall(number, ctypes.byref(attr), ctypes.c_size_t(attr_size(abi)), 0)
    if ruleset < 0:
        raise failure("landlock_create_ruleset")
    try:
        for path, rights in paths:
            allow_path(c, number, ruleset, path, rights & attr.handled_access_fs)
        for port in ports:
            rule = NetPortAttr(CONNECT_TCP, port)
            add_rule(c, number, ruleset, RULE_NET_PORT, ctypes.byref(rule), f"TCP port {port}")
        for port in bind_ports:
            rule = NetPortAttr(BIND_TCP, port)
            add_rule(c, number, ruleset, RULE_NET_PORT, ctypes.byref(rule), f"TCP bind {port}")
        if c.syscall(number + RESTRICT_SELF_OFFSET, ruleset, ctypes.c_uint32(0)) != 0:
            raise failure("landlock_restrict_self")
    finally:
        os.close(ruleset)


def allow_path(c: ctypes.CDLL, number: int, ruleset: int, path: Path, rights: int) -> None:
    """Allow `rights` beneath `path` in `ruleset` (a file's only its file rights; nothing for
    a path that is not there, or is a symlink: its target has rules of its own)."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISLNK(mode):
            return
        if not stat.S_ISDIR(mode):
            rights &= FILE_RIGHTS
        if rights:
            rule = PathBeneathAttr(rights, fd)
            add_rule(c, number, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), str(path))
    finally:
        os.close(fd)


def add_rule(c: ctypes.CDLL, number: int, ruleset: int, kind: int, rule: object, what: str) -> None:
    """Add one rule of `kind` to `ruleset` (LandlockUnavailable naming `what` when refused)."""
    if c.syscall(number + ADD_RULE_OFFSET, ruleset, kind, rule, ctypes.c_uint32(0)) != 0:
        raise failure(f"landlock_add_rule ({what})")


def failure(call: str) -> LandlockUnavailable:
    """Return the error for a failed `call`, from errno."""
    number = ctypes.get_errno()
    return LandlockUnavailable(number, f"{call} failed: {os.strerror(number)}")
