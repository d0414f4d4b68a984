"""What the gateway keeps on disk about each running kernel process, so a later gateway can
take it back: `resident.json` beside the kernel's records (0600, written whole)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypedDict, cast

from jupyter_client.provisioning.provisioner_base import KernelProvisionerBase

from loomgate.shared.paths import write_json_atomic

RESIDENT_FILE = "resident.json"
# Raised when what is stored changes shape. A gateway reads every format up to its own, each
# older one brought up to date by its step in MIGRATIONS, and refuses a newer one.
FORMAT = 1
# format N -> the function that turns a format-N state into format N + 1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


class ResidentLaunch(TypedDict):
    """What a restart of the kernel needs: its working directory and requested environment."""

    cwd: str | None
    env: dict[str, str]


class ResidentState(TypedDict):
    """One kernel process as a later gateway takes it back."""

    format: int
    kernel_id: str
    kernel_name: str
    connection_file: str
    provisioner: dict[str, Any]
    launch: ResidentLaunch
    written: float


class LaunchedKernel(Protocol):
    """What resident.json is written from: a kernel's manager (kernels/manager_protocol.py's
    ManagedKernel), its process launched."""

    kernel_name: str
    connection_file: str
    provisioner: KernelProvisionerBase | None

    @property
    def kernel_id(self) -> str | None:
        """Return the kernel's id (set once it has started)."""


class ResidentError(ValueError):
    """A resident.json this gateway cannot use (corrupt, foreign, or of an unknown format)."""


async def save(directory: Path, km: LaunchedKernel, launch: ResidentLaunch) -> None:
    """Write the state of `km`'s current process into `directory` (replacing an earlier one)."""
    assert km.provisioner is not None
    state = ResidentState(
        format=FORMAT,
        kernel_id=str(km.kernel_id),
        kernel_name=km.kernel_name,
        connection_file=km.connection_file,
        provisioner=await km.provisioner.get_provisioner_info(),
        launch=launch,
        written=time.time(),
    )
    write_json_atomic(directory / RESIDENT_FILE, state)


def load(directory: Path, kernel_id: str) -> ResidentState:
    """Return the state stored in `directory` for `kernel_id` (ResidentError saying why not)."""
    path = directory / RESIDENT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ResidentError(f"{path} cannot be read: {e}") from None
    if not isinstance(data, dict):
        raise ResidentError(f"{path} is not a JSON object")
    written = data.get("format")
    if not isinstance(written, int) or not 1 <= written <= FORMAT:
        raise ResidentError(
            f"{path} has format {written!r}; this gateway reads formats 1 to {FORMAT} "
            "(a newer loomgate wrote it?)"
        )
    for step in range(written, FORMAT):
        data = MIGRATIONS[step](data)
    missing = set(ResidentState.__required_keys__) - data.keys()
    if missing:
        raise ResidentError(f"{path} lacks {', '.join(sorted(missing))}")
    if data["kernel_id"] != kernel_id:
        raise ResidentError(f"{path} describes kernel {data['kernel_id']!r}, not {kernel_id!r}")
    connection = data["provisioner"].get("connection_info")
    if not isinstance(connection, dict) or "key" not in connection:
        raise ResidentError(f"{path} has no connection key")
    return cast(ResidentState, data)


def exists(directory: Path) -> bool:
    """Return whether `directory` holds a resident.json."""
    return (directory / RESIDENT_FILE).exists()


def remove(directory: Path) -> None:
    """Forget the process (it has ended for good)."""
    (directory / RESIDENT_FILE).unlink(missing_ok=True)
