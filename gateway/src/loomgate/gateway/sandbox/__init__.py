"""Sandboxed kernels, the one entry the rest of the gateway imports: the names it uses, by room."""

from loomgate.gateway.sandbox.confinement.bubblewrap import command_status
from loomgate.gateway.sandbox.confinement.kernel_homes import homes_environment
from loomgate.gateway.sandbox.confinement.launch import (
    SandboxLaunch,
    ipc_prefix,
    kernel_dirs_location,
    rules_from_json,
    rules_to_json,
    sandbox_wire,
    unconfined_kernel_dir,
)
from loomgate.gateway.sandbox.confinement.mechanism import SandboxUnavailable, probe
from loomgate.gateway.sandbox.confinement.packages import KernelPackages, remove_own_packages
from loomgate.gateway.sandbox.failures.cell_failures import record_failure
from loomgate.gateway.sandbox.policy.catalog import SandboxCatalog, launch_cwd
from loomgate.gateway.sandbox.policy.environment import confined_environment
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

__all__ = [
    "KernelPackages",
    "SandboxCatalog",
    "SandboxLaunch",
    "SandboxRules",
    "SandboxUnavailable",
    "command_status",
    "confined_environment",
    "homes_environment",
    "ipc_prefix",
    "kernel_dirs_location",
    "launch_cwd",
    "probe",
    "record_failure",
    "remove_own_packages",
    "rules_from_json",
    "rules_to_json",
    "sandbox_wire",
    "unconfined_kernel_dir",
]
