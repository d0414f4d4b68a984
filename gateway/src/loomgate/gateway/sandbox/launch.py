"""One confined kernel process: its directory, its limits, the command that starts it inside its
sandbox, and the sandbox's init, which is what gets signalled and killed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from loomgate.gateway.kernels.process_identity import ProcessIdentity
from loomgate.gateway.sandbox import bubblewrap, entry, macos
from loomgate.gateway.sandbox.limits import REMOVE_TIMEOUT, KernelLimits
from loomgate.gateway.sandbox.mechanism import SandboxUnavailable, probe
from loomgate.gateway.sandbox.profiles import SandboxRules
from loomgate.shared import wire
from loomgate.shared.sizes import format_size

IPC_PREFIX = "k"  # a local kernel's ZMQ ipc sockets: k-1 … k-5 in its ipc dir
INIT_TIMEOUT = 10.0  # how long a start waits for bubblewrap to name its init
MEMORY_KILL = "killed: memory limit"  # how the death of a kernel its memory limit ended begins

T = TypeVar("T")


def kernel_dirs_root() -> Path:
    """Return the directory that holds every local kernel's own (short: ipc socket paths must
    fit in 107 bytes), created private to this user."""
    root = Path(tempfile.gettempdir()) / f"loomgate-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    status = root.lstat()
    if root.is_symlink() or status.st_uid != os.getuid() or status.st_mode & 0o077:
        raise SandboxUnavailable(
            f"{root} is not a private directory of this user; remove it and start again"
        )
    return root


def ipc_prefix(kernel_dir: Path) -> str:
    """Return the prefix of the ZMQ ipc sockets of the kernel whose own dir is `kernel_dir`."""
    return str(bubblewrap.ipc_dir(kernel_dir) / IPC_PREFIX)


def unconfined_kernel_dir(kernel_id: str) -> Path:
    """Return an unconfined kernel's own dir, with its ipc dir (SandboxUnavailable when the
    root is not private to this user)."""
    directory = kernel_dirs_root() / kernel_id[:13]
    directory.mkdir(mode=0o700, exist_ok=True)
    bubblewrap.ipc_dir(directory).mkdir(mode=0o700, exist_ok=True)
    return directory


class SandboxLaunch:
    """A confined kernel's sandbox: rules, directory, limits and (once started) its init."""

    def __init__(
        self,
        rules: SandboxRules,
        directory: Path,
        limits: KernelLimits,
        mechanism: str,
        init: ProcessIdentity | None = None,
    ) -> None:
        self.rules = rules
        self.directory = directory
        self.limits = limits
        self.mechanism = mechanism
        self.init = init

    @classmethod
    def prepare(cls, rules: SandboxRules, kernel_id: str) -> SandboxLaunch:
        """Return the sandbox for a start of kernel `kernel_id` (SandboxUnavailable when this
        machine cannot enforce `rules`)."""
        mechanism = probe()
        mechanism.check(rules)
        directory = kernel_dirs_root() / kernel_id[:13]
        bubblewrap.prepare_kernel_dir(directory)
        if mechanism.system == "Darwin":  # no limits there (check() refused any)
            limits = KernelLimits(kernel_id, "none")
        else:
            limits = KernelLimits.create(kernel_id, rules)
        return cls(rules, directory, limits, mechanism.describe(rules))

    @property
    def ipc_prefix(self) -> str:
        """Return where the kernel's ZMQ ipc sockets go (files both sides of the sandbox see)."""
        return ipc_prefix(self.directory)

    @property
    def plan(self) -> entry.Plan:
        """Return what the entry does for this sandbox before bwrap runs."""
        return entry.Plan(
            self.limits.join_files, self.limits.rlimits, landlock=probe().landlock_scopes
        )

    def command(
        self,
        kernel_cmd: Sequence[str],
        *,
        cwd: Path,
        connection_file: Path,
        unset_env: Sequence[str],
        info_fd: int | None = None,
    ) -> list[str]:
        """Return the command that starts `kernel_cmd` inside the sandbox (bwrap writing its
        init's pid into `info_fd`)."""
        mechanism = probe()
        if mechanism.system == "Darwin":
            return self.macos_command(kernel_cmd, connection_file)
        assert mechanism.bwrap is not None  # prepare() checked it
        bwrap = bubblewrap.command(
            self.rules,
            kernel_cmd,
            bwrap=mechanism.bwrap,
            cwd=cwd,
            kernel_dir=self.directory,
            connection_file=connection_file,
            unset_env=unset_env,
            info_fd=info_fd,
        )
        return [*self.limits.prefix, *entry.command(self.plan, bwrap)]

    def spawn(
        self,
        kernel_cmd: Sequence[str],
        start: Callable[[list[str], tuple[int, ...]], T],
        *,
        cwd: Path,
        connection_file: Path,
        unset_env: Sequence[str],
    ) -> T:
        """Return `start(argv, pass_fds)` for the command that starts `kernel_cmd` inside the
        sandbox, called through the entry (Landlock's scopes on the thread that starts it),
        with bwrap's info file open on the fds to pass while it runs."""
        if probe().system == "Darwin":
            return start(self.macos_command(kernel_cmd, connection_file), ())
        fd = entry.open_info(bubblewrap.info_file(self.directory))
        try:
            argv = self.command(
                kernel_cmd,
                cwd=cwd,
                connection_file=connection_file,
                unset_env=unset_env,
                info_fd=fd,
            )
            return entry.spawn(self.plan, lambda: start(argv, (fd,)))
        finally:
            os.close(fd)

    def macos_command(self, kernel_cmd: Sequence[str], connection_file: Path) -> list[str]:
        """Return sandbox-exec's command for `kernel_cmd` (untested on macOS here): the kernel
        is the process itself, signalled as any kernel is."""
        temp = self.directory / "tmp"
        temp.mkdir(mode=0o700, exist_ok=True)
        text = macos.sbpl_profile(
            self.rules, temp_dir=temp, kernel_dir=self.directory, readable=[connection_file]
        )
        environment = [f"TMPDIR={temp}", f"IPYTHONDIR={temp / bubblewrap.IPYTHON_DIR.name}"]
        return macos.sandbox_exec_command(text, ["/usr/bin/env", *environment, *kernel_cmd])

    async def started(self) -> None:
        """Note the sandbox's init once bubblewrap has named it (sandbox-exec has none)."""
        if probe().system == "Darwin":
            return
        info = bubblewrap.info_file(self.directory)
        pid = await asyncio.to_thread(entry.read_info, info, INIT_TIMEOUT)
        self.init = ProcessIdentity.of(pid)

    def alive(self) -> bool:
        """Return whether the sandbox's init is still the process this launch started."""
        return self.init is not None and self.init.is_alive()

    @property
    def has_init(self) -> bool:
        """Return whether signals go to the sandbox's init (bubblewrap's) rather than the
        launched process (sandbox-exec's kernel is that process)."""
        return self.mechanism.startswith("bubblewrap")

    def signal(self, signum: int) -> None:
        """Send `signum` into the sandbox: SIGKILL to its init (which ends everything in it),
        any other signal to its init's process group (the kernel is in it)."""
        if self.init is None or not self.init.is_alive():
            return  # never signal a pid that now belongs to another process
        with contextlib.suppress(ProcessLookupError):
            if signum == signal.SIGKILL:
                bubblewrap.kill(self.init.pid)
            else:
                os.killpg(self.init.pid, signum)

    def ending(self) -> str | None:
        """Return how the kernel ended when its sandbox ended it (None otherwise)."""
        if self.limits.memory_killed() and self.rules.memory is not None:
            return f"{MEMORY_KILL} {format_size(self.rules.memory)} reached"
        return None

    def wire(self) -> wire.Sandbox:
        """Return the kernel's sandbox as its wire form shows it."""
        return sandbox_wire(self.rules, self.mechanism)

    def remove(self, timeout: float = REMOVE_TIMEOUT) -> None:
        """Remove the sandbox's directory and limits (the kernel has ended for good; blocks up
        to `timeout` seconds while its last processes exit)."""
        self.limits.remove(timeout)
        shutil.rmtree(self.directory, ignore_errors=True)

    def to_json(self) -> dict[str, Any]:
        """Return what a later gateway needs to take the kernel back."""
        return {
            "rules": rules_to_json(self.rules),
            "directory": str(self.directory),
            "limits": self.limits.to_json(),
            "mechanism": self.mechanism,
            "init": self.init.to_json() if self.init is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SandboxLaunch:
        """Return the launch `to_json` described."""
        init = data.get("init")
        return cls(
            rules_from_json(data["rules"]),
            Path(data["directory"]),
            KernelLimits.from_json(data["limits"]),
            str(data["mechanism"]),
            ProcessIdentity.from_json(init) if init else None,
        )


def rules_to_json(rules: SandboxRules) -> dict[str, Any]:
    """Return `rules` as JSON values."""
    return {
        "profile": rules.profile,
        "confined": rules.confined,
        "writable": [str(path) for path in rules.writable],
        "hidden": [str(path) for path in rules.hidden],
        "network": rules.network,
        "memory": rules.memory,
        "processes": rules.processes,
    }


def rules_from_json(data: dict[str, Any]) -> SandboxRules:
    """Return the rules `rules_to_json` described."""
    return SandboxRules(
        profile=str(data["profile"]),
        confined=bool(data["confined"]),
        writable=tuple(Path(path) for path in data["writable"]),
        hidden=tuple(Path(path) for path in data["hidden"]),
        network=bool(data["network"]),
        memory=data["memory"],
        processes=data["processes"],
    )


def rules_from_wire(sandbox: wire.Sandbox) -> SandboxRules:
    """Return the rules a kernel's wire form shows (confined when a mechanism enforces them)."""
    return SandboxRules(
        profile=sandbox["profile"],
        confined=bool(sandbox["mechanism"]),
        writable=tuple(Path(path) for path in sandbox["writable"]),
        hidden=tuple(Path(path) for path in sandbox["hidden"]),
        network=sandbox["network"],
        memory=sandbox["memory"],
        processes=sandbox["processes"],
    )


def sandbox_wire(rules: SandboxRules, mechanism: str) -> wire.Sandbox:
    """Return a kernel's rules as its wire form shows them."""
    return wire.Sandbox(
        profile=rules.profile,
        writable=[str(path) for path in rules.writable],
        hidden=[str(path) for path in rules.hidden],
        network=rules.network,
        memory=rules.memory,
        processes=rules.processes,
        mechanism=mechanism,
    )
