"""The kernel provisioner that makes kernels outlive their gateway, and takes them back after.

A jupyter_client kernel provisioner (entry point `loomgate-resident`, the gateway's default):
it launches the local kernel process so that the gateway's exit, even by SIGKILL, does not end
it (no parent-death watch, no inherited pipes), inside its sandbox when its profile confines
it, records who that process is (pid, start time, boot), and, loaded back from that record by a
later gateway, signals and polls it by pid only while the pid still belongs to that very process.
A restart may continue one of the kernel's frozen copies instead of starting a process
(residency/kernel_family.py: a rollback, or a restart in a sandbox that holds checkpoints).

Longer than 400 lines: jupyter_client gives a kernel one provisioner object, whose launch, record
for a later gateway and control by pid all read and change the same process, sandbox and family.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.provisioning.local_provisioner import LocalProvisioner

from loomgate.gateway.errors import Unavailable
from loomgate.gateway.process_end import Ending, exit_ending
from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency import kernel_transport, shared_dirs
from loomgate.gateway.residency.kernel_command import (
    IPYTHON_HISTORY_IN_MEMORY,
    copyable,
    runs_ipykernel,
    with_huge_pages,
)
from loomgate.gateway.residency.kernel_family import CopyFailed, KernelFamily, copy_connection
from loomgate.gateway.residency.kernel_files import (
    output_log_of,
    remove_socket_files,
    remove_sockets,
)
from loomgate.gateway.residency.kernel_process import own_pid
from loomgate.gateway.residency.kernel_transport import Transport
from loomgate.gateway.residency.launch_arguments import CopySource, launch_arguments
from loomgate.gateway.residency.launch_markers import LaunchMarkers
from loomgate.gateway.sandbox import (
    KernelPackages,
    SandboxLaunch,
    SandboxRules,
    SandboxUnavailable,
    command_status,
    confined_environment,
    homes_environment,
    ipc_prefix,
    kernel_dirs_location,
    rules_from_json,
    rules_to_json,
    sandbox_wire,
    unconfined_kernel_dir,
)
from loomgate.shared import wire

# ipykernel exits when the pid in this variable goes away; the gateway's kernels must not.
PARENT_VARIABLE = "JPY_PARENT_PID"


class ResidentProvisioner(LocalProvisioner):
    """LocalProvisioner whose kernels survive the gateway and can be taken back by the next one."""

    identity: ProcessIdentity | None = None
    log_path: Path | None = None
    log_start = 0  # where the current launch's output begins in the log
    rules: SandboxRules | None = None  # None: a kernel whose sandbox loomgate did not choose
    sandbox: SandboxLaunch | None = None  # the sandbox of a confined kernel
    packages: KernelPackages | None = None  # its own dir for pip; None: pip left as it is
    own_packages: bool | None = None  # whether it has one (its first start decides)
    markers: LaunchMarkers | None = None  # where its launch is marked (its launch arguments')
    transport: Transport = "ipc"  # how the gateway reaches it (chosen at each launch)
    kernel_connection_file: Path | None = None  # the one the kernel reads (a relayed kernel's own)
    copyable = False  # whether its command runs under the copy launcher (it can be copied)
    family: KernelFamily  # its copies and own process (residency/kernel_family.py)
    copy_from: CopySource | None = None  # what makes a fork's first process
    shared_dir: Path | None = None  # a fork's: its origin's own dir, which it uses too
    # Set while the kernel manager shuts the process down for a restart (jupyter_client's kill
    # is not told).
    restarting = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.family = KernelFamily()

    @property
    def taken_back(self) -> bool:
        """Return whether the process was launched by an earlier gateway (not our child)."""
        return self.process is None and self.identity is not None

    @property
    def has_process(self) -> bool:
        """Return whether there is a kernel process to manage (our child, or taken back)."""
        if self._by_own():  # bubblewrap may have exited with the kernel it first ran
            return not self.family.own_gone()
        return self.process is not None or (self.taken_back and self._is_ours())

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        """Prepare the launch as its launch arguments say: no parent-death watch, no pipes
        shared with the gateway, a confined kernel's sandbox (Unavailable where it cannot be
        enforced), the transport its kernel takes, its packages dir."""
        arguments = launch_arguments(kwargs)
        self.markers = arguments.markers
        self.copy_from = arguments.copy_from if self.identity is None else None  # a first start
        if self.copy_from is not None and arguments.origin_dir is not None:  # a fork's
            self.shared_dir = arguments.origin_dir
            shared_dirs.join(self.shared_dir, str(self.kernel_id))
            if arguments.origin_sandbox is not None:
                self.sandbox = shared_dirs.shared(arguments.origin_sandbox)
        self.rules = arguments.rules
        env = dict(kwargs.get("env") or os.environ)
        env.pop(PARENT_VARIABLE, None)
        fresh = self.family.replace_from is None and self.copy_from is None  # not a copy
        if self.rules is not None and self.rules.confined and fresh:
            self._alone_in_sandbox()
            env = confined_environment(env, ())
            self._prepare_sandbox(self.rules)
            assert self.sandbox is not None
            await self.sandbox.open_network()  # before its start: the kernel may connect at once
            env.update(self.sandbox.proxy_variables())
        argv = self.kernel_spec.argv if self.kernel_spec is not None else []
        own_network = self.sandbox is not None and self.sandbox.confiner.own_network
        self.transport = kernel_transport.choose(argv, own_network=own_network)
        assert self.parent is not None
        if self.transport == "tcp":
            kernel_transport.prepare(self.parent, "tcp", "")
        else:
            kernel_transport.prepare(self.parent, self.transport, self._ipc_prefix())
        env = self._with_packages(env, arguments.by_loomgate, Path(kwargs.get("cwd") or Path.cwd()))
        if self.sandbox is not None and self.rules is not None:  # after pip chose its cache
            env = homes_environment(env, self.rules, self.sandbox.directory)
        if runs_ipykernel(argv):  # its history in memory; its copies made faster
            env = with_huge_pages(env)
            kwargs["extra_arguments"] = [
                *kwargs.get("extra_arguments", ()),
                IPYTHON_HISTORY_IN_MEMORY,
            ]
        kwargs["env"] = env
        kwargs["independent"] = True
        launch: dict[str, Any] = await super().pre_launch(**kwargs)
        launch["cmd"] = copyable(launch["cmd"])  # an ipykernel that can be checkpointed
        self.copyable = launch["cmd"] != list(self.kernel_spec.argv if self.kernel_spec else [])
        self._kernel_side(launch)
        return launch

    def _kernel_side(self, launch: dict[str, Any]) -> None:
        """Give a relayed kernel its own connection file (its ports inside its namespace) and
        the sandbox the relay's routes; tell a confined TCP kernel's sandbox its ports."""
        km = self.parent
        assert km is not None
        self.kernel_connection_file = Path(km.connection_file)
        if self.sandbox is None:
            return
        if self.transport == "relayed":
            own = kernel_transport.write_relayed_connection(km, self.sandbox.directory)
            launch["cmd"] = [arg.replace(km.connection_file, str(own)) for arg in launch["cmd"]]
            self.kernel_connection_file = own
            self.sandbox.relay = kernel_transport.relay_routes(km)
        elif self.transport == "tcp":
            self.sandbox.tcp_ports = kernel_transport.kernel_ports(km)

    def _with_packages(self, env: dict[str, str], asked: bool, cwd: Path) -> dict[str, str]:
        """Return `env` with the kernel's own packages dir for pip: a Python kernel loomgate
        starts or confines has one (one the Jupyter API left unconfined installs as before)."""
        spec, rules = self.kernel_spec, self.rules
        if self.own_packages is None:  # restarts keep what the first start decided
            self.own_packages = rules is not None and (asked or rules.confined)
        if not self.own_packages or rules is None or spec is None or not runs_ipykernel(spec.argv):
            return env
        directory = self.sandbox.directory if self.sandbox else self._unconfined_dir()
        self.packages = KernelPackages.for_kernel(directory, spec.argv[0], env, cwd)
        return self.packages.environment(env, rules)

    def _prepare_sandbox(self, rules: SandboxRules) -> None:
        km = self.parent
        assert km is not None
        try:
            self.sandbox = SandboxLaunch.prepare(rules, km.kernel_id, self.sandbox)
        except SandboxUnavailable as e:
            raise Unavailable(str(e)) from None

    def _alone_in_sandbox(self) -> None:
        """Refuse a fresh start in a sandbox other kernels use (a fork's, or its origin's): its
        own would end them; a restart there continues the kernel's starter instead."""
        if self.sandbox is not None and self.shares_sandbox():
            raise Unavailable(
                "the kernel shares its sandbox with its origin or its forks, and its starter has "
                "ended: a fresh start would end them; stop it and start a new kernel"
            )

    def shares_sandbox(self) -> bool:
        """Return whether other kernels (its origin, its forks) use the kernel's sandbox too."""
        if self.sandbox is None:
            return False
        return shared_dirs.in_use(self.sandbox.directory, but=str(self.kernel_id))

    def _ipc_prefix(self) -> str:
        """Return where the kernel's ipc sockets go: its sandbox's ipc dir, or an unconfined
        kernel's own dir's (kept across restarts, as a client's connection expects); a fork's
        are named for it, beside its origin's."""
        if self.sandbox is not None:
            prefix = self.sandbox.ipc_prefix
        else:
            prefix = ipc_prefix(self._unconfined_dir())
        if self.shared_dir is None:
            return prefix
        return str(Path(prefix).with_name(str(self.kernel_id)[:8]))

    def kernel_dir(self) -> Path:
        """Return where the kernel's own dir is: its sandbox's, or (unconfined) a fork's
        origin's or its own (nothing made or checked)."""
        if self.sandbox is not None:
            return self.sandbox.directory
        return self.shared_dir or kernel_dirs_location() / str(self.kernel_id)[:13]

    def _unconfined_dir(self) -> Path:
        """Return an unconfined kernel's own dir (Unavailable when the root is not private)."""
        assert self.parent is not None
        if self.shared_dir is not None:
            return self.shared_dir
        try:
            return unconfined_kernel_dir(self.parent.kernel_id)
        except SandboxUnavailable as e:
            raise Unavailable(str(e)) from None

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        """Launch the kernel with stdin on /dev/null and its output in a log of its own (or
        continue the frozen copy `replace_from` to make it)."""
        self.log_path = self._output_log()
        self.restarting = False
        frozen, self.family.replace_from = self.family.replace_from, None
        if frozen is not None:
            return await self._copied(frozen.live_copy, "the kernel's copy")
        copy_from, self.copy_from = self.copy_from, None
        if copy_from is not None:
            return await self._copied(copy_from, "the fork")
        self.family.own = None  # a new process: found again when it is needed
        assert self.parent is not None
        markers, kernel_id = self.markers, str(self.kernel_id)
        connection_file = self.parent.connection_file
        named = str(self.kernel_connection_file or connection_file)  # on the command line
        if markers is not None:  # a gateway killed from here on leaves a trace
            markers.launching(kernel_id, connection_file, named)
        with self.log_path.open("ab") as output:
            self.log_start = output.tell()  # this launch's output follows the earlier ones
            kwargs.update(stdin=subprocess.DEVNULL, stdout=output, stderr=output)
            if self.sandbox is None:
                info = await super().launch_kernel(cmd, **kwargs)  # Popen; nothing awaited after
            else:
                launch = super().launch_kernel  # Popen, on the entry's thread, in a loop of its own
                info = self.sandbox.spawn(
                    cmd,
                    lambda argv, fds: asyncio.run(launch(argv, **kwargs, pass_fds=fds)),
                    cwd=Path(kwargs.get("cwd") or Path.cwd()),
                    connection_file=Path(named),
                    unset_env=(PARENT_VARIABLE,),
                )
        self.identity = ProcessIdentity.of(self.pid)
        if markers is not None:
            markers.launched(kernel_id, connection_file, self.identity, self.pgid, self.sandbox)
        self.log_path.chmod(0o600)
        if self.sandbox is not None:
            try:
                await self.sandbox.started(self.pid)
            except Exception as e:
                await super().kill()
                raise Unavailable(
                    f"the kernel's sandbox did not start ({e}); see {self.log_path}"
                ) from None
            if markers is not None:  # now with its init
                markers.launched(kernel_id, connection_file, self.identity, self.pgid, self.sandbox)
        return info

    async def _copied(self, make: CopySource, what: str) -> KernelConnectionInfo:
        """Make the kernel's process a copy that `make` starts on the kernel's own connection
        (a checkpoint's or the starter's for a rollback or a restart that keeps the sandbox,
        another kernel's for a fork); Unavailable when none comes."""
        assert self.log_path is not None
        self.log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        named = copy_connection(json_safe(dict(self.connection_info)), Path(self._ipc_prefix()))
        try:
            copy = await make(named)
        except Exception as e:
            if self.shared_dir is not None and self.family.own is None:  # a fork never made
                shared_dirs.leave(self.shared_dir, str(self.kernel_id))
            if isinstance(e, CopyFailed):
                raise Unavailable(f"{what} did not start: {e}") from None
            raise
        self.adopt(copy)
        self.copyable = True
        return self.connection_info

    async def revive(self) -> bool:
        """Start the kernel again from its starter when its process ended while no gateway
        watched but its checkpoints live on (they stay, to roll back to); return whether it
        did."""
        self.family.forget_ended()
        if self.family.starter is None or not self.family.checkpoints:  # the ended are forgotten
            return False
        self.log_path = self.log_path or self._output_log()
        remove_socket_files(self.connection_info)  # the dead process's
        try:
            await self._copied(self.family.starter.live_copy, "the kernel's restart")
        except Unavailable:
            return False
        return True

    def adopt(self, copy: ProcessIdentity) -> None:
        """Make `copy`, a process this provisioner did not launch, the kernel's own (marked as a
        launch is: a gateway killed before resident.json names it leaves nothing running)."""
        if self.markers is not None:
            self.markers.launched(
                str(self.kernel_id), self.connection_file_path(), copy, copy.pid, None
            )
        self.family.own = copy
        # The copy is the kernel's process, unless the kernel was launched in a sandbox with an
        # init (a fork launched nothing).
        launched = self.process is not None or self.identity is not None
        if self.sandbox is None or not self.sandbox.has_init or not launched:
            self.process = None
            self.pid = self.pgid = copy.pid
            self.identity = copy

    def connection_file_path(self) -> str:
        """Return the connection file the gateway wrote for the kernel."""
        assert self.parent is not None
        return str(self.parent.connection_file)

    def kernel_process(self) -> ProcessIdentity | None:
        """Return the kernel's own process (inside its sandbox, below bubblewrap), noted from
        now on; None when it cannot be found."""
        family = self.family
        if family.own is None or not family.own.is_alive():
            launched = self.pid if self.sandbox is not None else None
            named = str(self.kernel_connection_file or self.connection_file_path())
            found = own_pid(launched, named) if launched is not None else self.pid
            family.own = ProcessIdentity.of(found)
        return family.own

    @property
    def ipc_dir(self) -> Path:
        """Return the kernel's ipc dir: seen alike by the gateway and the kernel."""
        return Path(self._ipc_prefix()).parent

    def _keeps_sandbox(self) -> bool:
        """Return whether a restart keeps the sandbox (it holds the kernel's copies, or other
        kernels): only the kernel's own process is ended, and its next comes from its starter."""
        return self.sandbox is not None and self.family.has_starter()

    def _own_only(self, restart: bool) -> bool:
        """Return whether ending the kernel ends its own process alone, not its sandbox's: a
        restart that keeps the sandbox, or a sandbox other kernels use (noting the process)."""
        restart = restart or self.restarting
        if not ((restart and self._keeps_sandbox()) or self.shares_sandbox()):
            return False
        return self.kernel_process() is not None

    def _by_own(self) -> bool:
        """Return whether the kernel's life is its own process's, not the launched one's: in a
        sandbox with an init, once it has copies (bubblewrap, the launched process, exits with
        the kernel it first ran; the sandbox lives on while a process is in it)."""
        return self.family.own is not None and self.sandbox is not None and self.sandbox.has_init

    @property
    def sandbox_model(self) -> wire.Sandbox | None:
        """Return the kernel's sandbox as its wire form shows it (None: not chosen by loomgate)."""
        if self.sandbox is not None:
            model = self.sandbox.wire()
        elif self.rules is not None:
            model = sandbox_wire(self.rules, "")
        else:
            return None
        model["packages"] = str(self.packages.directory) if self.packages else None
        return model

    def _output_log(self) -> Path:
        """Return where the kernel's own stdout and stderr go: beside its connection file."""
        assert self.parent is not None
        return output_log_of(Path(self.parent.connection_file))

    # -- persistence --------------------------------------------------------------------------

    async def get_provisioner_info(self) -> dict[str, Any]:
        """Return what a later gateway needs to find this process again (JSON-safe)."""
        info: dict[str, Any] = await super().get_provisioner_info()
        info["connection_info"] = json_safe(info.get("connection_info") or {})
        info["identity"] = self.identity.to_json() if self.identity is not None else None
        info["log_path"] = str(self.log_path) if self.log_path is not None else None
        info["sandbox"] = self.sandbox.to_json() if self.sandbox is not None else None
        info["sandbox_model"] = self.sandbox_model
        info["own_packages"] = self.own_packages
        # An unconfined kernel's too (a confined one's are its sandbox's): its restarts keep them.
        info["rules"] = rules_to_json(self.rules) if self.rules is not None else None
        info["copyable"] = self.copyable
        info["family"] = self.family.to_json()
        info["shared_dir"] = str(self.shared_dir) if self.shared_dir is not None else None
        return info

    async def load_provisioner_info(self, provisioner_info: dict[str, Any]) -> None:
        """Take back a process an earlier gateway launched (checked with `is_ours`)."""
        await super().load_provisioner_info(provisioner_info)
        identity = provisioner_info.get("identity")
        self.identity = ProcessIdentity.from_json(identity) if identity else None
        log_path = provisioner_info.get("log_path")
        self.log_path = Path(log_path) if log_path else None
        sandbox = provisioner_info.get("sandbox")
        self.sandbox = SandboxLaunch.from_json(sandbox) if sandbox else None
        if self.sandbox is not None and shared_dirs.in_use(self.sandbox.directory):
            self.sandbox = shared_dirs.shared(self.sandbox)  # one proxy for its kernels
        shared_dir = provisioner_info.get("shared_dir")
        self.shared_dir = Path(shared_dir) if shared_dir else None
        if self.sandbox is not None:
            self.rules = self.sandbox.rules
        elif provisioner_info.get("rules"):
            self.rules = rules_from_json(provisioner_info["rules"])
        self.own_packages = provisioner_info.get("own_packages")  # None: its next start decides
        self.copyable = bool(provisioner_info.get("copyable"))
        self.family = KernelFamily.from_json(provisioner_info.get("family"))

    def _is_ours(self) -> bool:
        """Return whether the recorded pid is still the process this provisioner launched."""
        return self.identity is not None and self.identity.is_alive()

    def is_ours(self) -> bool:
        """Return whether the kernel process is alive and is the one recorded (not a reused pid)."""
        if self._by_own() or self.family.own_gone():
            return not self.family.own_gone()
        if self.process is not None:
            return self.process.poll() is None
        return self._is_ours()

    def ending(self) -> Ending:
        """Return how the kernel process ended."""
        ended_by_sandbox = self.sandbox.ending() if self.sandbox is not None else None
        if ended_by_sandbox is not None:
            return ended_by_sandbox
        if self._by_own():
            return Ending(
                "unknown",
                "the kernel process ended (its exit status is not known: its copies outlived it)",
            )
        if self.process is not None:
            status = self.process.poll()
            if self.sandbox is not None and self.sandbox.has_init:  # bwrap's own status
                status = command_status(status)
            return exit_ending(status)
        return Ending(
            "unknown",
            "the kernel process ended (its exit status is unknown: this gateway took it "
            "back from an earlier one)",
        )

    # -- the process, by pid when it is not our child -----------------------------------------

    async def poll(self) -> int | None:
        """Return None while the kernel runs, else its exit status (-1 if unknown)."""
        if self._by_own() or self.family.own_gone():
            if self.process is not None:
                self.process.poll()  # bubblewrap, exited with the kernel it first ran: reaped
            return -1 if self.family.own_gone() else None
        if not self.taken_back:
            status: int | None = await super().poll()
            return status
        return None if self._is_ours() else -1

    async def wait(self) -> int | None:
        """Return the exit status once the kernel process has ended (-1 if unknown)."""
        if self._by_own():
            assert self.family.own is not None
            await self.family.own.ended()
            return -1
        if not self.taken_back:
            status: int | None = await super().wait()
            return status
        assert self.identity is not None
        await self.identity.ended()
        return -1

    async def send_signal(self, signum: int) -> None:
        """Signal the kernel's process group, only if the pid is still that kernel (inside a
        sandbox: its init's, which SIGKILL ends with everything in it; a kernel with copies: its
        own process's group, without them)."""
        has_init = self.sandbox is not None and self.sandbox.has_init
        if self.family.own is not None and has_init and signum != signal.SIGKILL:
            self.family.signal_own(signum)
            return
        if signum == signal.SIGKILL and self._own_only(restart=False):
            self.family.signal_own(signum)
            return
        if self.sandbox is not None and self.sandbox.has_init:
            self.sandbox.signal(signum)
            return
        if not self.taken_back:
            await super().send_signal(signum)
            return
        if not self._is_ours():
            return  # never signal a pid that now belongs to another process
        assert self.pid is not None
        try:
            os.killpg(self.pgid or self.pid, signum)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(self.pid, signum)

    async def kill(self, restart: bool = False) -> None:
        """Kill the kernel (its process group; a sandbox's init; for a restart that keeps the
        sandbox, the kernel's own process, and the next comes from its starter)."""
        if self._own_only(restart):
            self.family.signal_own(signal.SIGKILL)
            if (restart or self.restarting) and self.family.replace_from is None:
                self.family.replace_from = self.family.starter
            return
        if self.sandbox is not None and self.sandbox.has_init:
            self.sandbox.signal(signal.SIGKILL)
            return
        if not self.taken_back:
            await super().kill(restart=restart)
            return
        await self.send_signal(signal.SIGKILL)

    async def terminate(self, restart: bool = False) -> None:
        """Terminate the kernel (its process group; in a sandbox, its init's)."""
        if self._own_only(restart):
            self.family.signal_own(signal.SIGTERM)
            return
        if self.sandbox is not None and self.sandbox.has_init:
            self.sandbox.signal(signal.SIGTERM)
            return
        if not self.taken_back:
            await super().terminate(restart=restart)
            return
        await self.send_signal(signal.SIGTERM)

    async def cleanup(self, restart: bool = False) -> None:
        """Forget the process once it is gone (a restart launches a new one)."""
        await super().cleanup(restart=restart)
        if self.markers is not None:
            self.markers.forget(str(self.kernel_id))
        if self.taken_back and not self._is_ours():
            self.identity = None
        if not restart:
            await self.ended()

    async def ended(self) -> None:
        """End what the kernel leaves behind once it has ended for good: its sockets, its
        copies, and its sandbox unless other kernels use it (then its own process alone)."""
        others = shared_dirs.leave(self.kernel_dir(), str(self.kernel_id))
        if self.sandbox is not None and self.sandbox.has_init and self.process is not None:
            self.sandbox.launched = self.sandbox.launched or self.process  # reaped at its end
            self.process = None
        if others:
            self.family.signal_own(signal.SIGKILL)  # its sandbox's init stays theirs
        self.family.end()  # its copies' order files go: its ipc dir empties
        remove_sockets(self.connection_info)  # its packages dir stays while others use it
        if self.sandbox is not None and not others:
            self.sandbox.signal(signal.SIGKILL)  # what its init still holds
            await self.sandbox.close_network()
            await asyncio.to_thread(self.sandbox.remove)  # waits for the sandbox to empty
            await asyncio.to_thread(self.sandbox.reap)
            shared_dirs.close(self.sandbox.directory)


def json_safe(value: Any) -> Any:
    """Return `value` with bytes (a connection key) as text, for a JSON file."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    return value
