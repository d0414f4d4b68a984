"""The macOS confiner: the kernel runs under `sandbox-exec` with a profile generated from its rules
(untested on macOS here); the kernel is the launched process itself, signalled as any kernel."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, TypeVar

from loomgate.gateway.sandbox.confinement import bubblewrap, macos
from loomgate.gateway.sandbox.confinement.confiner import (
    OR_NONE,
    Confiner,
    KernelSandbox,
    SandboxUnavailable,
    Start,
)
from loomgate.gateway.sandbox.confinement.limits import KernelLimits
from loomgate.gateway.sandbox.policy.profiles import SandboxRules

__all__ = ["SandboxExecConfiner"]

T = TypeVar("T")
# What sandbox-exec cannot give, as docs/sandbox.md's table of mechanisms says.
LACKS = (
    "its own /tmp (TMPDIR points to a temp dir of its own)",
    "its own /proc",
    "a pid namespace",
    "memory and processes limits",
)


class SandboxExecConfiner(Confiner):
    """A Seatbelt (SBPL) profile per kernel, run by `sandbox-exec`: no init, no limits."""

    kind: ClassVar[str] = "sandbox-exec"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SandboxExecConfiner)

    def __repr__(self) -> str:
        return "SandboxExecConfiner()"

    def describe(self, rules: SandboxRules | None = None) -> str:
        """Return "sandbox-exec"."""
        return "sandbox-exec"

    def lacks(self, rules: SandboxRules | None = None) -> list[str]:
        """Return what sandbox-exec cannot give a kernel (its network, when it has one, is
        the host's: the proxy that checks destinations is Linux's)."""
        found = list(LACKS)
        if rules is None or rules.network.proxied:
            found.append(
                "checking where its connections go: it reaches every address, loopback and "
                "private ones too"
            )
        return found

    def check(self, rules: SandboxRules) -> None:
        """Raise SandboxUnavailable when `rules` set a limit (macOS has no per-kernel memory or
        process limit loomgate can set) or sandbox-exec is missing."""
        if not Path(macos.SANDBOX_EXEC).exists():
            raise SandboxUnavailable(f"{macos.SANDBOX_EXEC} is missing: {OR_NONE}")
        if rules.memory is not None or rules.processes is not None:
            raise SandboxUnavailable(
                f"profile {rules.profile!r} sets a memory or process limit, which loomgate "
                "cannot enforce on macOS: set memory = false and processes = false in "
                f"sandbox.toml, {OR_NONE}"
            )

    def create_limits(self, kernel_id: str, rules: SandboxRules) -> KernelLimits:
        """Return no limits (check() refused any)."""
        return KernelLimits(kernel_id, "none")

    def command(
        self,
        sandbox: KernelSandbox,
        kernel_cmd: Sequence[str],
        connection_file: Path,
        unset_env: Sequence[str] = (),
    ) -> list[str]:
        """Return sandbox-exec's command for `kernel_cmd`, in a temp dir of the kernel's own,
        without the variables `unset_env`."""
        temp = sandbox.directory / "tmp"
        temp.mkdir(mode=0o700, exist_ok=True)
        text = macos.sbpl_profile(
            sandbox.rules,
            temp_dir=temp,
            kernel_dir=sandbox.directory,
            readable=[connection_file],
            tcp_ports=sandbox.tcp_ports,
        )
        unset = [part for name in dict.fromkeys(unset_env) for part in ("-u", name)]
        environment = [f"TMPDIR={temp}", f"IPYTHONDIR={temp / bubblewrap.IPYTHON_DIR.name}"]
        return macos.sandbox_exec_command(text, ["/usr/bin/env", *unset, *environment, *kernel_cmd])

    def spawn(
        self,
        sandbox: KernelSandbox,
        kernel_cmd: Sequence[str],
        start: Start[T],
        *,
        cwd: Path,
        connection_file: Path,
        unset_env: Sequence[str],
    ) -> T:
        """Return `start(argv, ())` for sandbox-exec's command: the kernel is that process."""
        return start(self.command(sandbox, kernel_cmd, connection_file, unset_env), ())
