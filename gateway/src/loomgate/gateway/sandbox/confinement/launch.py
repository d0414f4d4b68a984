"""One confined kernel process: its directory, its limits, the confiner that starts it inside its
sandbox (the mechanism this gateway's probe chose, or for a kernel taken back the one that
started it), and the sandbox's init, when it has one, which is what gets signalled and killed."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from loomgate.gateway.process_end import Ending
from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.sandbox.confinement import bubblewrap, placeholders
from loomgate.gateway.sandbox.confinement.bubblewrap_confiner import BubblewrapConfiner
from loomgate.gateway.sandbox.confinement.confiner import Confiner, SandboxUnavailable, Start
from loomgate.gateway.sandbox.confinement.limits import REMOVE_TIMEOUT, KernelLimits
from loomgate.gateway.sandbox.confinement.mechanism import confiner_from_json, probe
from loomgate.gateway.sandbox.confinement.sandbox_exec_confiner import SandboxExecConfiner
from loomgate.gateway.sandbox.network.kernel_network import proxy_environment, proxy_socket
from loomgate.gateway.sandbox.network.network_rules import NetworkPolicy, NetworkRefusal
from loomgate.gateway.sandbox.network.proxy import KernelProxy
from loomgate.gateway.sandbox.policy.profiles import SandboxRules
from loomgate.shared import wire
from loomgate.shared.sizes import format_size

IPC_PREFIX = "k"  # a local kernel's ZMQ ipc sockets: k-1 … k-5 in its ipc dir
# How a launch written before confiners had kinds says bubblewrap started it (its mechanism's
# description begins so); any other was sandbox-exec's.
BUBBLEWRAP = "bubblewrap"

T = TypeVar("T")


def kernel_dirs_root() -> Path:
    """Return the directory that holds every local kernel's own (short: ipc socket paths must
    fit in 107 bytes), created private to this user."""
    root = kernel_dirs_location()
    root.mkdir(mode=0o700, exist_ok=True)
    status = root.lstat()
    if root.is_symlink() or status.st_uid != os.getuid() or status.st_mode & 0o077:
        raise SandboxUnavailable(
            f"{root} is not a private directory of this user; remove it and start again"
        )
    return root


def kernel_dirs_location() -> Path:
    """Return where `kernel_dirs_root` is (nothing created or checked)."""
    return Path(tempfile.gettempdir()) / f"loomgate-{os.getuid()}"


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
    """A confined kernel's sandbox: rules, directory, limits, the confiner that started it, what
    status says of it (`mechanism`, `lacks`) and (once started) its init."""

    def __init__(
        self,
        rules: SandboxRules,
        directory: Path,
        limits: KernelLimits,
        mechanism: str,
        init: ProcessIdentity | None = None,
        *,
        confiner: Confiner | None = None,
        lacks: Sequence[str] = (),
        proxy_port: int | None = None,
    ) -> None:
        self.rules = rules
        self.directory = directory
        self.limits = limits
        self.mechanism = mechanism  # how it is enforced, as status shows it
        self.init = init
        self.confiner = confiner if confiner is not None else legacy_confiner(mechanism)
        self.lacks = list(lacks)
        self.ready_fd: int | None = None  # a start waiting for its cgroups (Landlock alone)
        self.proxy: KernelProxy | None = None  # this gateway's proxy for it, while it listens
        # Where the proxy listens for a kernel on the host's network (Landlock alone): the
        # variables inside name it, so a gateway taking the kernel back listens there again.
        self.proxy_port = proxy_port
        # A kernel that takes only TCP: the ports it listens on where it shares the host's
        # network, or the relay's routes (ipc socket, port) into a namespace of its own.
        self.tcp_ports: tuple[int, ...] = ()
        self.relay: list[tuple[Path, int]] = []
        # The process this gateway launched the sandbox with, where it outlives the kernel it
        # first ran (bubblewrap, while copies or forks live in the sandbox): reaped as it ends.
        self.launched: subprocess.Popen[bytes] | None = None

    @classmethod
    def prepare(
        cls, rules: SandboxRules, kernel_id: str, previous: SandboxLaunch | None = None
    ) -> SandboxLaunch:
        """Return the sandbox for a start of kernel `kernel_id` under this gateway's mechanism
        (SandboxUnavailable when it cannot enforce `rules`); a restart's keeps the proxy of
        the `previous` start."""
        mechanism = probe()
        mechanism.check(rules)
        confiner = mechanism.confiner
        assert confiner is not None  # check() refuses confined rules without one
        directory = kernel_dirs_root() / kernel_id[:13]
        bubblewrap.prepare_kernel_dir(directory)
        limits = confiner.create_limits(kernel_id, rules)
        launch = cls(
            rules,
            directory,
            limits,
            confiner.describe(rules),
            confiner=confiner,
            lacks=confiner.lacks(rules),
        )
        confiner.prepare(launch)
        if previous is not None:
            launch.proxy, launch.proxy_port = previous.proxy, previous.proxy_port
        return launch

    @property
    def ipc_prefix(self) -> str:
        """Return where the kernel's ZMQ ipc sockets go (files both sides of the sandbox see)."""
        return ipc_prefix(self.directory)

    def spawn(
        self,
        kernel_cmd: Sequence[str],
        start: Start[T],
        *,
        cwd: Path,
        connection_file: Path,
        unset_env: Sequence[str],
    ) -> T:
        """Return `start(argv, pass_fds)` for the command that starts `kernel_cmd` inside the
        sandbox, as its confiner starts it (through the entry, on a thread of its own)."""
        return self.confiner.spawn(
            self,
            kernel_cmd,
            start,
            cwd=cwd,
            connection_file=connection_file,
            unset_env=unset_env,
        )

    async def started(self, pid: int | None = None) -> None:
        """Finish the start whose launched process is `pid` and note the sandbox's init once
        the start has named it (some confiners have none)."""
        self.init = await self.confiner.started(self, pid)

    async def open_network(self) -> None:
        """Start the kernel's proxy when its rules send its connections through one: on the unix
        socket bound into its own network namespace, else on a loopback port of the host's."""
        if not self.rules.network.proxied or self.proxy is not None:
            return
        proxy = KernelProxy(self.rules.network, self.rules.profile)
        if self.confiner.own_network:
            socket = proxy_socket(self.directory)
            socket.parent.mkdir(mode=0o700, exist_ok=True)
            await proxy.start_unix(socket)
        else:
            self.proxy_port = await proxy.start_tcp(port=self.proxy_port or 0)
        self.proxy = proxy

    async def close_network(self) -> None:
        """Stop the kernel's proxy (its connections end); its kernel keeps its variables."""
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            await proxy.close()

    def proxy_variables(self) -> dict[str, str]:
        """Return the variables that point the kernel's clients at its proxy, where the kernel
        shares the host's network (inside a namespace of its own, bwrap sets the bridge's)."""
        if self.confiner.own_network or not self.rules.network.proxied:
            return {}
        assert self.proxy_port is not None, "open_network() first"
        return proxy_environment(self.proxy_port)

    def network_refusals(self, since: float) -> list[NetworkRefusal]:
        """Return the connections the kernel's proxy refused at or after `since` (time.time())."""
        return self.proxy.refusals_since(since) if self.proxy is not None else []

    @property
    def has_init(self) -> bool:
        """Return whether signals go to the sandbox's init (bubblewrap's) rather than the
        launched process (the kernel itself under Landlock alone and sandbox-exec)."""
        return self.confiner.has_init

    def signal(self, signum: int) -> None:
        """Send `signum` into the sandbox through its init (SIGKILL ends everything in it)."""
        if self.init is None or not self.init.is_alive():
            return  # never signal a pid that now belongs to another process
        with contextlib.suppress(ProcessLookupError):
            self.confiner.signal_init(self.init.pid, signum)

    def ending(self) -> Ending | None:
        """Return how the kernel ended when its sandbox ended it (None otherwise)."""
        if self.limits.memory_killed() and self.rules.memory is not None:
            reached = f"killed: memory limit {format_size(self.rules.memory)} reached"
            return Ending("memory_limit", reached)
        return None

    def reap(self, timeout: float = REMOVE_TIMEOUT) -> None:
        """Wait (up to `timeout` seconds) for the launched process to exit once the sandbox has
        ended, so that it leaves no zombie behind."""
        launched, self.launched = self.launched, None
        if launched is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                launched.wait(timeout)

    def wire(self) -> wire.Sandbox:
        """Return the kernel's sandbox as its wire form shows it."""
        return sandbox_wire(self.rules, self.mechanism, self.lacks)

    def remove(self, timeout: float = REMOVE_TIMEOUT) -> None:
        """Remove the sandbox's directory, limits and the placeholders it made in the person's
        dirs (the kernel has ended for good; blocks up to `timeout` seconds while its last
        processes exit)."""
        if self.ready_fd is not None:  # a start never finished: its shell runs nothing
            os.close(self.ready_fd)
            self.ready_fd = None
        self.limits.remove(timeout)
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.directory.parent.is_dir():  # else a reboot cleared it, and the records with it
            placeholders.remove(self.directory)

    def to_json(self) -> dict[str, Any]:
        """Return what a later gateway needs to take the kernel back."""
        return {
            "rules": rules_to_json(self.rules),
            "directory": str(self.directory),
            "limits": self.limits.to_json(),
            "mechanism": self.mechanism,
            "confiner": self.confiner.to_json(),
            "lacks": list(self.lacks),
            "init": self.init.to_json() if self.init is not None else None,
            "proxy_port": self.proxy_port,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SandboxLaunch:
        """Return the launch `to_json` described (one written before confiners had kinds too:
        its mechanism said which)."""
        init = data.get("init")
        confiner = data.get("confiner")
        return cls(
            rules_from_json(data["rules"]),
            Path(data["directory"]),
            KernelLimits.from_json(data["limits"]),
            str(data["mechanism"]),
            ProcessIdentity.from_json(init) if init else None,
            confiner=confiner_from_json(confiner) if confiner else None,
            lacks=[str(line) for line in data.get("lacks", [])],
            proxy_port=data.get("proxy_port"),
        )


def legacy_confiner(mechanism: str) -> Confiner:
    """Return the confiner of a launch that names only its mechanism's description (written
    before confiners had kinds): bubblewrap's when it begins "bubblewrap", else sandbox-exec's."""
    if mechanism.startswith(BUBBLEWRAP):
        return BubblewrapConfiner(BUBBLEWRAP)
    return SandboxExecConfiner()


def rules_to_json(rules: SandboxRules) -> dict[str, Any]:
    """Return `rules` as JSON values."""
    return {
        "profile": rules.profile,
        "confined": rules.confined,
        "writable": [str(path) for path in rules.writable],
        "hidden": [str(path) for path in rules.hidden],
        "network": rules.network.to_json(),
        "memory": rules.memory,
        "processes": rules.processes,
        "protected": list(rules.protected),
        "read_only": [str(path) for path in rules.read_only],
        "readable": [str(path) for path in rules.readable],
    }


def rules_from_json(data: dict[str, Any]) -> SandboxRules:
    """Return the rules `rules_to_json` described (protected names, read-only and readable
    paths as the rules' defaults in a launch kept before they were)."""
    kept: dict[str, Any] = {}
    if "protected" in data:
        kept["protected"] = tuple(str(name) for name in data["protected"])
    if "read_only" in data:
        kept["read_only"] = tuple(Path(path) for path in data["read_only"])
    if "readable" in data:
        kept["readable"] = tuple(Path(path) for path in data["readable"])
    return SandboxRules(
        profile=str(data["profile"]),
        confined=bool(data["confined"]),
        writable=tuple(Path(path) for path in data["writable"]),
        hidden=tuple(Path(path) for path in data["hidden"]),
        network=NetworkPolicy.from_json(data["network"]),
        memory=data["memory"],
        processes=data["processes"],
        **kept,
    )


def rules_from_wire(sandbox: wire.Sandbox) -> SandboxRules:
    """Return the rules a kernel's wire form shows (confined when a mechanism enforces them)."""
    return SandboxRules(
        profile=sandbox["profile"],
        confined=bool(sandbox["mechanism"]),
        writable=tuple(Path(path) for path in sandbox["writable"]),
        hidden=tuple(Path(path) for path in sandbox["hidden"]),
        network=NetworkPolicy.from_json(sandbox["network"]),
        memory=sandbox["memory"],
        processes=sandbox["processes"],
    )


def sandbox_wire(rules: SandboxRules, mechanism: str, lacks: Sequence[str] = ()) -> wire.Sandbox:
    """Return a kernel's rules as its wire form shows them (with what its mechanism lacks)."""
    return wire.Sandbox(
        profile=rules.profile,
        writable=[str(path) for path in rules.writable],
        hidden=[str(path) for path in rules.hidden],
        network=rules.network.to_json(),
        memory=rules.memory,
        processes=rules.processes,
        mechanism=mechanism,
        lacks=list(lacks),
        packages=None,  # the kernel's provisioner knows its packages dir
    )
