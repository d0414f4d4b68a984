"""What the rest of the gateway reads of a kernel's process through its kernel manager's
provisioner: whether it runs, how it ended, its sandbox, where its launch was marked and the
connection file it reads (a kernel manager of another provisioner answers what it can)."""

from __future__ import annotations

from typing import Any

from loomgate.gateway.process_end import Ending, exit_ending
from loomgate.gateway.residency.launch_markers import LaunchMarkers
from loomgate.gateway.residency.provisioner import ResidentProvisioner
from loomgate.shared import wire


def kernel_connection_file(km: Any) -> str:
    """Return the connection file kernel manager `km`'s kernel reads (a relayed kernel's own),
    which its command line names."""
    provisioner = getattr(km, "provisioner", None)
    if isinstance(provisioner, ResidentProvisioner) and provisioner.kernel_connection_file:
        return str(provisioner.kernel_connection_file)
    return str(km.connection_file)


def launch_markers(km: object) -> LaunchMarkers | None:
    """Return where the launch of kernel manager `km`'s process was marked (None: nowhere, as
    for a kernel manager of no gateway)."""
    provisioner = getattr(km, "provisioner", None)
    return provisioner.markers if isinstance(provisioner, ResidentProvisioner) else None


def process_running(km: object) -> bool:
    """Return whether the kernel's process still runs (True when no process is known)."""
    provisioner = getattr(km, "provisioner", None)
    if isinstance(provisioner, ResidentProvisioner):
        return provisioner.is_ours()
    process = getattr(provisioner, "process", None)
    return process is None or process.poll() is None


def sandbox_of(km: object) -> wire.Sandbox | None:
    """Return the sandbox a kernel's process runs under (None: not one loomgate chose)."""
    provisioner = getattr(km, "provisioner", None)
    if isinstance(provisioner, ResidentProvisioner):
        return provisioner.sandbox_model
    return None


def process_ending(km: object) -> Ending:
    """Return how the kernel's process ended."""
    ending = getattr(km, "ending", "")
    if ending:  # a kernel on an upstream: what the upstream said
        return Ending("unknown", str(ending))
    provisioner = getattr(km, "provisioner", None)
    if isinstance(provisioner, ResidentProvisioner):
        return provisioner.ending()
    process = getattr(provisioner, "process", None)
    return exit_ending(process.poll() if process is not None else None)
