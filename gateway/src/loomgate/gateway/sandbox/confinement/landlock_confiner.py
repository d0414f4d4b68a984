"""The Landlock-only confiner, for machines that refuse user namespaces (an AppArmor-restricted
Ubuntu, an unprivileged container): the entry's thread drops its capabilities and restricts itself
to a whole Landlock ruleset, then starts the kernel itself through the shell, which sets its
rlimits and waits for the gateway to put it in its cgroups. No namespace: what that costs is
`lacks()`."""

from __future__ import annotations

import array
import asyncio
import fcntl
import os
import termios
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from loomgate.gateway.process_identity import ProcessIdentity, start_time
from loomgate.gateway.sandbox.confinement import bubblewrap, entry, landlock
from loomgate.gateway.sandbox.confinement.confiner import (
    OR_NONE,
    Confiner,
    KernelSandbox,
    SandboxUnavailable,
    Start,
)
from loomgate.gateway.sandbox.confinement.kernel_homes import homes_dir
from loomgate.gateway.sandbox.confinement.landlock_paths import on_the_way, path_rules, real
from loomgate.gateway.sandbox.confinement.limits import (
    KernelLimits,
    LimitsHost,
    limits_lacks,
    limits_mechanism,
)
from loomgate.gateway.sandbox.network.kernel_network import UNSET, proxy_environment
from loomgate.gateway.sandbox.policy.home_view import kernel_home_view
from loomgate.gateway.sandbox.policy.profiles import SandboxRules, lies_inside
from loomgate.gateway.sandbox.policy.protected_names import GIT

__all__ = [
    "BUBBLEWRAP_FIX",
    "DEVICE_FILES",
    "ENV",
    "WRITABLE_DIR",
    "LandlockConfiner",
    "kernel_temp_dir",
    "unheld",
    "writable_dirs",
]

T = TypeVar("T")
ENV = "/usr/bin/env"  # sets the kernel's own temp dirs and unsets what it must not inherit
TMP = Path("/tmp")
DEV = Path("/dev")
# What every process reads and writes in /dev; the rest of /dev is closed (as root, the disks
# would be readable whole), /dev/pts too (it holds the person's terminals).
DEVICE_FILES = (
    Path("/dev/null"),
    Path("/dev/zero"),
    Path("/dev/full"),
    Path("/dev/random"),
    Path("/dev/urandom"),
    Path("/dev/tty"),
)
READ_TIMEOUT = 10.0  # seconds the gateway holds the FIFO for its shell to read the line
READ_POLL = 0.001
SHARED_MEMORY = Path("/dev/shm")  # POSIX semaphores and shared memory (multiprocessing)
WRITABLE_DIR = (
    "a writable dir: its .git and protected names cannot stay read-only in it (a right on a dir "
    "holds for its whole tree), so a profile with one is refused"
)
# What Landlock alone cannot give any kernel (docs/sandbox.md's table of mechanisms).
LACKS = (
    "its own /tmp (the host's is closed to it; TMPDIR is a temp dir of its own)",
    "its own /proc (other processes and their command lines are visible)",
    "a pid namespace (a process it moves to a new session outlives it)",
    "hiding unix sockets by path (the session bus, docker.sock: reachable where they exist)",
    WRITABLE_DIR,
    "listing the dirs on the way to a hidden path (/, your home)",
    "its own /dev/shm (the host's is shared)",
    "a terminal (/dev/pts, where yours are, is closed)",
)
NO_UDP = "refusing UDP without network (Landlock refuses TCP only)"
BUBBLEWRAP_FIX = (
    "install your distribution's bubblewrap and let it make user namespaces (on Ubuntu, an "
    "AppArmor profile for /usr/bin/bwrap, which 25.04 and later ship)"
)
SHOWN_NAMES = 2  # protected names a refusal shows before "…"


def joined_fifo(kernel_dir: Path) -> Path:
    """Return the FIFO a kernel's entry waits on until the gateway has put it in its cgroups."""
    return kernel_dir / "joined"


def kernel_temp_dir(kernel_dir: Path) -> Path:
    """Return the kernel's own temp dir (TMPDIR; no private /tmp here), in its own dir."""
    return kernel_dir / "tmp"


class LandlockConfiner(Confiner):
    """A Landlock domain per kernel (ABI `abi`), no capabilities, limits on `host`."""

    kind: ClassVar[str] = "landlock"

    def __init__(self, abi: int, host: LimitsHost | None = None) -> None:
        self.abi = abi
        self.host = host if host is not None else LimitsHost()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LandlockConfiner) and (self.abi, self.host) == (
            other.abi,
            other.host,
        )

    def __repr__(self) -> str:
        return f"LandlockConfiner({self.abi}, {self.host!r})"

    def describe(self, rules: SandboxRules | None = None) -> str:
        """Return how `rules` are enforced, e.g. "landlock only (ABI 4), rlimits"."""
        limits = self.host.offers() if rules is None else limits_mechanism(self.host, rules)
        return f"landlock only (ABI {self.abi})" + (f", {limits}" if limits != "none" else "")

    def lacks(self, rules: SandboxRules | None = None) -> list[str]:
        """Return what Landlock alone cannot give a kernel under `rules` (any profile's when
        None): no namespace, and what this ABI lacks."""
        found = list(LACKS)
        if rules is None or rules.network.off:
            found.append(NO_UDP)
        if self.abi < landlock.SCOPES_ABI:
            found.append(
                "abstract unix sockets and signals to your other processes are not refused "
                f"(that needs Landlock ABI {landlock.SCOPES_ABI}, Linux 6.12)"
            )
        if (rules is None or rules.network.proxied) and self.abi < landlock.NET_ABI:
            found.append(
                "holding its connections to its proxy: Landlock ABI "
                f"{self.abi} has no network rules (that needs ABI {landlock.NET_ABI}, Linux 6.7), "
                "so loopback, private and link-local addresses are reachable directly"
            )
        if self.abi < 3:  # the ABI that brought TRUNCATE
            found.append("refusing truncate() outside the writable paths (Landlock ABI 3)")
        if self.abi < 2:  # the ABI that brought REFER
            found.append("moving files from one dir to another (Landlock ABI 2)")
        if rules is not None:
            writable = [real(path) for path in rules.writable]
            kept = [*(real(path) for path in rules.hidden), *read_only(rules)]
            found += [
                f"creating or removing files directly in {way} (a hidden or read-only path "
                "lies inside it)"
                for way in on_the_way(writable, kept)
            ]
            found += limits_lacks(limits_mechanism(self.host, rules), rules)
        else:
            found += limits_lacks(self.host.offers(), None)
        return found

    def check(self, rules: SandboxRules) -> None:
        """Raise SandboxUnavailable when `rules` have no network and this ABI cannot refuse
        TCP (nothing would hold the kernel off the network), or when they keep names read-only
        inside a writable dir (`unheld`)."""
        if rules.network.off and self.abi < landlock.NET_ABI:
            raise SandboxUnavailable(
                f"profile {rules.profile!r} has no network, and Landlock ABI {self.abi} "
                f"cannot refuse TCP (that needs ABI {landlock.NET_ABI}, Linux 6.7 or later), "
                "nor make the kernel a network namespace of its own without bubblewrap: install "
                "bubblewrap and let it make user namespaces, use a profile with network = true, "
                f"{OR_NONE}"
            )
        refusal = unheld(rules, writable_dirs(rules))
        if refusal is not None:
            raise SandboxUnavailable(refusal)

    def create_limits(self, kernel_id: str, rules: SandboxRules) -> KernelLimits:
        """Return kernel `kernel_id`'s limits on this host (its cgroups created)."""
        return KernelLimits.create(kernel_id, rules, self.host)

    def prepare(self, sandbox: KernelSandbox) -> None:
        """Make the kernel's own temp dir."""
        kernel_temp_dir(sandbox.directory).mkdir(mode=0o700, exist_ok=True)

    def tcp_ports(self, sandbox: KernelSandbox) -> tuple[int, ...] | None:
        """Return the TCP ports the kernel may connect to (None: TCP is not refused): none
        without network, its proxy's when its connections go through one."""
        network = sandbox.rules.network
        if network.host:
            return None
        if network.proxied:
            assert sandbox.proxy_port is not None, "the kernel's proxy listens before it starts"
            return (sandbox.proxy_port,)
        return ()

    def ruleset(
        self,
        sandbox: KernelSandbox,
        kernel_cmd: Sequence[str],
        connection_file: Path,
        joined: Path | None = None,
    ) -> landlock.Ruleset:
        """Return the Landlock ruleset of a kernel: read everywhere but the hidden paths, the
        host's /tmp and /dev; write in the writable paths and its own dirs, but not in what
        must stay read-only there (its environment, loomgate's installation); its connection
        file, its interpreter's prefix and what every process needs in /dev."""
        rules, directory = sandbox.rules, sandbox.directory
        read, write = landlock.READ, landlock.READ | landlock.WRITE
        own = [kernel_temp_dir(directory), bubblewrap.ipc_dir(directory)]
        own += [bubblewrap.packages_dir(directory), homes_dir(directory)]
        reads = [(Path("/"), read)]
        reads += [(real(connection_file), landlock.READ_FILE)]
        reads += [(prefix, read) for prefix in interpreter_prefixes(kernel_cmd, rules)]
        writes = [(real(path), write) for path in rules.writable]
        writes += [(real(path), write) for path in own]
        fifo = landlock.READ_FILE | landlock.WRITE_FILE  # the shell opens it read-write first
        writes += [(joined, fifo)] if joined is not None else []
        device = landlock.READ_FILE | landlock.WRITE_FILE
        writes += [(real(path), device) for path in DEVICE_FILES]
        writes += [(SHARED_MEMORY, write)]
        hidden = [real(path) for path in rules.hidden]
        hidden += [TMP, real(TMP), DEV, real(directory.parent), real(directory)]
        hidden = list(dict.fromkeys(hidden))
        # The home dir as a bubblewrap kernel sees it: what no list holds is walked around too.
        view = kernel_home_view(hidden, rules.readable)
        allowed = dict(path_rules(reads, [*hidden, *view.left_out]))
        for path, rights in path_rules(writes, [*hidden, *read_only(rules)]):
            allowed[path] = allowed.get(path, 0) | rights
        return landlock.Ruleset(
            self.abi,
            tuple(sorted(allowed.items())),
            tcp_ports=self.tcp_ports(sandbox),
            scopes=self.abi >= landlock.SCOPES_ABI,
            bind_ports=tuple(sandbox.tcp_ports),
        )

    def command(
        self,
        sandbox: KernelSandbox,
        plan: entry.Plan,
        kernel_cmd: Sequence[str],
        unset_env: Sequence[str],
    ) -> list[str]:
        """Return the argv that runs `kernel_cmd` through the entry with `plan`, in its own
        temp dirs and without the variables `unset_env`."""
        temp = kernel_temp_dir(sandbox.directory)
        unset = [part for name in dict.fromkeys(unset_env) for part in ("-u", name)]
        environment = [f"TMPDIR={temp}", f"IPYTHONDIR={temp / bubblewrap.IPYTHON_DIR.name}"]
        if sandbox.rules.network.proxied and sandbox.proxy_port is not None:
            variables = proxy_environment(sandbox.proxy_port)
            environment += [f"{name}={value}" for name, value in variables.items()]
            unset += [part for name in UNSET for part in ("-u", name)]
        kernel = [ENV, *unset, *environment, *kernel_cmd]
        return [*sandbox.limits.prefix, *entry.command(plan, kernel)]

    def plan(
        self,
        sandbox: KernelSandbox,
        kernel_cmd: Sequence[str],
        connection_file: Path,
        joined: Path | None = None,
    ) -> entry.Plan:
        """Return what the entry does for `sandbox`: wait on FIFO `joined` until the gateway has
        put it in its cgroups (once restricted, it cannot write them itself), set its rlimits,
        and on its thread drop every capability and apply the kernel's ruleset."""
        return entry.Plan(
            [f"<{joined}"] if joined is not None else [],
            sandbox.limits.rlimits,
            ruleset=self.ruleset(sandbox, kernel_cmd, connection_file, joined),
            drop_capabilities=True,
        )

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
        """Return `start(argv, ())` for the kernel itself, called on the entry's thread once it
        is restricted: the kernel is the launched process (no init). With cgroups to join, its
        shell waits on a FIFO of the kernel's dir, which `started()` ends; the gateway holds
        it open meanwhile, so its death ends the wait and the shell runs nothing."""
        joined = None
        if sandbox.limits.join_files:
            joined = joined_fifo(sandbox.directory)
            joined.unlink(missing_ok=True)
            os.mkfifo(joined, 0o600)
            # Read and write: open at once, and the shell's open for reading does not block.
            sandbox.ready_fd = os.open(joined, os.O_RDWR | os.O_CLOEXEC)
        plan = self.plan(sandbox, kernel_cmd, connection_file, joined)
        argv = self.command(sandbox, plan, kernel_cmd, unset_env)
        return entry.spawn(plan, lambda: start(argv, ()))

    async def started(self, sandbox: KernelSandbox, pid: int | None) -> ProcessIdentity | None:
        """Put the launched process `pid` (the entry's shell, waiting) in the kernel's cgroups,
        then let it go on; it has no init."""
        await asyncio.to_thread(join, sandbox, pid)  # until its shell has read the line
        return None

    def to_json(self) -> dict[str, Any]:
        """Return this confiner's kind and ABI."""
        return {"kind": self.kind, "abi": self.abi}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LandlockConfiner:
        """Return the confiner `to_json` described."""
        return cls(int(data.get("abi", 1)))


def join(sandbox: KernelSandbox, pid: int | None) -> None:
    """Put `pid` in `sandbox`'s cgroups and tell its waiting shell (when a start waits), holding
    the FIFO until the shell has read the line (closed before, the line would be lost); without
    the line, at the FIFO's end, the shell exits and runs nothing."""
    ready, sandbox.ready_fd = sandbox.ready_fd, None
    if ready is None:
        return
    try:
        if pid is None:
            raise ProcessLookupError("the kernel's launched process is not known")
        for join_file in sandbox.limits.join_files:
            Path(join_file).write_text(str(pid))
        os.write(ready, b"\n")
        deadline = time.monotonic() + READ_TIMEOUT
        while unread(ready) and time.monotonic() < deadline and start_time(pid) is not None:
            time.sleep(READ_POLL)  # no event says a FIFO was read
    finally:
        os.close(ready)
        joined_fifo(sandbox.directory).unlink(missing_ok=True)


def unread(fd: int) -> int:
    """Return how many bytes wait in the pipe `fd` is open on."""
    waiting = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, waiting)
    return waiting[0]


def writable_dirs(rules: SandboxRules) -> list[Path]:
    """Return the writable paths of `rules` that are dirs, as Landlock would grant them (real):
    each holds its .git and the protected names (a file, or a path not there, holds none)."""
    return [path for path in dict.fromkeys(real(p) for p in rules.writable) if path.is_dir()]


def unheld(rules: SandboxRules, dirs: Sequence[Path]) -> str | None:
    """Return the sentence refusing `rules` under Landlock alone when their writable dirs `dirs`
    keep names read-only inside them (None: there is none). Each keeps its .git, whatever the
    profile takes out, and Landlock only allows: the right to create a file in a dir holds in
    its .git/hooks too, so no ruleset keeps a dir writable and what lies in it read-only."""
    if not dirs:
        return None
    others = [name for name in rules.protected if name != GIT]
    kept = ".git"
    if others:
        shown = ", ".join(others[:SHOWN_NAMES]) + (", …" if len(others) > SHOWN_NAMES else "")
        kept += f" and {len(others)} other name{'s' if len(others) > 1 else ''} ({shown})"
    where = "dir" if len(dirs) == 1 else "dirs"
    return (
        f"profile {rules.profile!r} keeps {kept} read-only inside its writable {where} "
        f"{', '.join(map(str, dirs))}, which Landlock alone cannot hold (a right on a dir holds "
        f"for its whole tree): {BUBBLEWRAP_FIX}, use a profile with no writable dir "
        f"(writable = []), {OR_NONE}"
    )


def read_only(rules: SandboxRules) -> list[Path]:
    """Return the paths inside writable ones that stay read-only (the kernel's environment,
    loomgate's installation): a write grant is walked around them as around hidden paths."""
    return [real(path) for path in rules.read_only]


def interpreter_prefixes(kernel_cmd: Sequence[str], rules: SandboxRules) -> list[Path]:
    """Return the prefixes of the kernel's interpreter (its venv's, and the real one's), always
    readable, also under the host's /tmp; not where the profile hides them."""
    if not kernel_cmd or not kernel_cmd[0].startswith("/"):
        return []
    program = Path(kernel_cmd[0])
    found = [real(program.parent).parent, real(program).parent.parent]
    hidden = [real(path) for path in rules.hidden]
    return [
        prefix
        for prefix in dict.fromkeys(found)
        if prefix != Path("/") and not any(lies_inside(prefix, h) for h in hidden)
    ]
