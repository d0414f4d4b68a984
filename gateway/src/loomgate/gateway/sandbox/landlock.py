"""Landlock through ctypes: the kernel's ABI version, and scoping the calling process so it can
neither reach abstract unix sockets nor signal processes outside its domain."""

from __future__ import annotations

import ctypes
import os

__all__ = ["SCOPES_ABI", "LandlockUnavailable", "abi_version", "restrict_scopes"]

# landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: the same numbers on every
# architecture that has them (they came after the syscall table was unified at 424).
SYSCALLS = {"x86_64": 444, "aarch64": 444, "arm64": 444}
CREATE_RULESET_VERSION = 1 << 0
RESTRICT_SELF_OFFSET = 2  # landlock_restrict_self is landlock_create_ruleset + 2
PR_SET_NO_NEW_PRIVS = 38
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1
SCOPES_ABI = 6  # the first ABI with `scoped`


class RulesetAttr(ctypes.Structure):
    """struct landlock_ruleset_attr as of ABI 6."""

    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class LandlockUnavailable(OSError):
    """The kernel cannot apply Landlock scopes (no Landlock, or an ABI older than 6)."""


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


def restrict_scopes() -> None:
    """Forbid the calling thread and its future children to connect to abstract unix sockets or
    signal processes outside its Landlock domain (sets no_new_privs, which the domain needs)."""
    version = abi_version()
    if version < SCOPES_ABI:
        raise LandlockUnavailable(
            f"Landlock scopes need ABI {SCOPES_ABI} (Linux 6.12 or later); this kernel reports "
            f"{'no Landlock' if version == 0 else f'ABI {version}'}"
        )
    number = create_ruleset_number()
    assert number is not None  # abi_version() found Landlock
    c = libc()
    attr = RulesetAttr(0, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    if c.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise failure("prctl(PR_SET_NO_NEW_PRIVS)")
    ruleset = c.syscall(number, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        raise failure("landlock_create_ruleset")
    try:
        if c.syscall(number + RESTRICT_SELF_OFFSET, ruleset, ctypes.c_uint32(0)) != 0:
            raise failure("landlock_restrict_self")
    finally:
        os.close(ruleset)


def failure(call: str) -> LandlockUnavailable:
    """Return the error for a failed `call`, from errno."""
    number = ctypes.get_errno()
    return LandlockUnavailable(number, f"{call} failed: {os.strerror(number)}")
