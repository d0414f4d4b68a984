"""Dropping every Linux capability of the calling thread, and of what it starts (as bubblewrap's
`--cap-drop ALL` does): a root gateway's kernel under Landlock alone must not keep root's
powers (loading a module, changing the network, signalling anyone)."""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

__all__ = ["CapabilitiesError", "drop_all"]

PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_LAST_CAP = Path("/proc/sys/kernel/cap_last_cap")
CAP_SETPCAP = 8
LAST_CAP_FALLBACK = 40  # CAP_CHECKPOINT_RESTORE, the last in Linux 6.x


class CapabilitiesError(OSError):
    """The thread's capabilities could not be dropped."""


class CapHeader(ctypes.Structure):
    """struct __user_cap_header_struct."""

    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class CapData(ctypes.Structure):
    """struct __user_cap_data_struct (two of them, for 64 capabilities, in version 3)."""

    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def last_cap() -> int:
    """Return the highest capability number this kernel knows."""
    try:
        return int(CAP_LAST_CAP.read_text())
    except (OSError, ValueError):
        return LAST_CAP_FALLBACK


def drop_all() -> None:
    """Empty the calling thread's bounding, ambient, inheritable, permitted and effective
    capability sets, so that no process it starts has one, root's included (an exec as uid 0
    takes its capabilities from the bounding set). Without CAP_SETPCAP (an unprivileged
    gateway) the bounding set stays: such a thread has no capability to keep, and
    no_new_privs keeps an exec from gaining one."""
    c = ctypes.CDLL(None, use_errno=True)
    header = CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (CapData * 2)()
    if c.capget(ctypes.byref(header), data) != 0:
        raise error("capget")
    if (data[0].effective >> CAP_SETPCAP) & 1:
        for cap in range(last_cap() + 1):
            if c.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise error(f"prctl(PR_CAPBSET_DROP, {cap})")
    if c.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0:
        raise error("prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    empty = (CapData * 2)()
    if c.capset(ctypes.byref(header), empty) != 0:
        raise error("capset")


def error(call: str) -> CapabilitiesError:
    """Return the error for a failed `call`, from errno."""
    number = ctypes.get_errno()
    return CapabilitiesError(number, f"{call} failed: {os.strerror(number)}")
