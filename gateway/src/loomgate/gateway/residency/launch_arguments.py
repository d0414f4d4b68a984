"""What the gateway hands its provisioner with every start of a kernel, as a start argument
(`loom_launch`, the way jupyter_client hands a provisioner `cwd` and `env`): the kernel's sandbox
rules, whether loomgate itself asked for the kernel, where launches are marked, and for a fork
what makes its first process and the dir and sandbox it shares with its origin; and which
kernel specs that provisioner launches (no other is handed them). jupyter_client keeps a start's
arguments for the kernel's restarts, so a restart gets them again."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpec
from jupyter_client.provisioning.factory import KernelProvisionerFactory
from traitlets.config import Configurable

from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency.launch_markers import LaunchMarkers
from loomgate.gateway.sandbox import SandboxLaunch, SandboxRules

LAUNCH_ARGUMENT = "loom_launch"
# What makes a kernel's process by copying another: given the connection file, it returns it.
CopySource = Callable[[Path], Awaitable[ProcessIdentity]]
PROVISIONER_NAME = "loomgate-resident"  # the provisioner's entry point: the gateway's default


@dataclass(frozen=True)
class LaunchArguments:
    """A kernel's launch as the gateway decided it."""

    # The kernel's sandbox (None: not loomgate's to choose, as for a kernel manager of no gateway)
    rules: SandboxRules | None = None
    # Started through loomgate's own API (False: the standard Jupyter API's)
    by_loomgate: bool = True
    markers: LaunchMarkers | None = None  # where a launch is noted until resident.json takes over
    # A fork's first process: made by copying another kernel's, on the connection file given,
    # instead of started (its restarts start its command as any kernel's).
    copy_from: CopySource | None = None
    # A fork's origin's own dir and sandbox (None: unconfined), which the fork uses too.
    origin_dir: Path | None = None
    origin_sandbox: SandboxLaunch | None = None


def launch_arguments(kwargs: dict[str, Any]) -> LaunchArguments:
    """Return (and take out of a start's `kwargs`) the launch arguments it carries, or none."""
    found = kwargs.pop(LAUNCH_ARGUMENT, None)
    return found if isinstance(found, LaunchArguments) else LaunchArguments()


def provisioned_by_resident(spec: KernelSpec, parent: Configurable) -> bool:
    """Return whether kernels of `spec` are launched by loomgate's provisioner (the spec's own
    choice, else the default of jupyter_client's provisioner factory under `parent`)."""
    factory = KernelProvisionerFactory.instance(parent=parent)
    chosen = spec.metadata.get("kernel_provisioner", {}).get("provisioner_name")
    return bool((chosen or factory.default_provisioner_name) == PROVISIONER_NAME)
