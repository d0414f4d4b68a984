"""The kernel provisioner that makes kernels outlive their gateway, and takes them back after.

A jupyter_client kernel provisioner (entry point `loomgate-resident`, the gateway's default):
it launches the local kernel process so that the gateway's exit, even by SIGKILL, does not end
it (no parent-death watch, no inherited pipes), inside its sandbox when its profile confines
it, records who that process is (pid, start time, boot), and, loaded back from that record by a
later gateway, signals and polls it by pid only while the pid still belongs to that very process.
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
from loomgate.gateway.jupyter_internals import update_launch_arguments
from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency.kernel_command import (
    IPYTHON_HISTORY_IN_MEMORY,
    runs_ipykernel,
    use_ipc,
)
from loomgate.gateway.residency.kernel_files import output_log_of, remove_sockets
from loomgate.gateway.residency.launches import LaunchMarkers
from loomgate.gateway.sandbox.bubblewrap import command_status
from loomgate.gateway.sandbox.environment import confined_environment
from loomgate.gateway.sandbox.kernel_homes import homes_environment
from loomgate.gateway.sandbox.launch import (
    SandboxLaunch,
    ipc_prefix,
    sandbox_wire,
    unconfined_kernel_dir,
)
from loomgate.gateway.sandbox.mechanism import SandboxUnavailable
from loomgate.gateway.sandbox.packages import KernelPackages
from loomgate.gateway.sandbox.profiles import SandboxRules
from loomgate.shared import wire

PROVISIONER_NAME = "loomgate-resident"
# ipykernel exits when the pid in this variable goes away; the gateway's kernels must not.
PARENT_VARIABLE = "JPY_PARENT_PID"
SANDBOX_ARGUMENT = "loom_sandbox"  # the start argument that carries a kernel's SandboxRules


class ResidentProvisioner(LocalProvisioner):
    """LocalProvisioner whose kernels survive the gateway and can be taken back by the next one."""

    identity: ProcessIdentity | None = None
    log_path: Path | None = None
    rules: SandboxRules | None = None  # None: a kernel whose sandbox loomgate did not choose
    sandbox: SandboxLaunch | None = None  # the sandbox of a confined kernel
    packages: KernelPackages | None = None  # its own dir for pip; None: pip left as it is
    own_packages: bool | None = None  # whether it has one (its first start decides)

    @property
    def taken_back(self) -> bool:
        """Return whether the process was launched by an earlier gateway (not our child)."""
        return self.process is None and self.identity is not None

    @property
    def has_process(self) -> bool:
        """Return whether there is a kernel process to manage (our child, or taken back)."""
        return self.process is not None or (self.taken_back and self._is_ours())

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        """Prepare the launch: no parent-death watch, no pipes shared with the gateway, a
        confined kernel's sandbox (Unavailable where it cannot be enforced), its packages dir."""
        env = dict(kwargs.get("env") or os.environ)
        env.pop(PARENT_VARIABLE, None)
        asked = kwargs.get(SANDBOX_ARGUMENT) is not None  # loomgate's start, not Jupyter's
        self.rules = kwargs.pop(SANDBOX_ARGUMENT, None) or self._jupyter_api_rules(kwargs)
        if self.rules is not None and self.rules.confined:
            env = confined_environment(env, ())
            self._prepare_sandbox(self.rules)
            assert self.sandbox is not None
            await self.sandbox.open_network()  # before its start: the kernel may connect at once
            env.update(self.sandbox.proxy_variables())
        else:
            self._use_own_sockets()
        env = self._with_packages(env, asked, Path(kwargs.get("cwd") or Path.cwd()))
        if self.sandbox is not None and self.rules is not None:  # after pip chose its cache
            env = homes_environment(env, self.rules, self.sandbox.directory)
        kwargs["env"] = env
        kwargs["independent"] = True
        if self.kernel_spec is not None and runs_ipykernel(self.kernel_spec.argv):
            kwargs["extra_arguments"] = [
                *kwargs.get("extra_arguments", ()),
                IPYTHON_HISTORY_IN_MEMORY,
            ]
        launch: dict[str, Any] = await super().pre_launch(**kwargs)
        return launch

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

    def _jupyter_api_rules(self, kwargs: dict[str, Any]) -> SandboxRules | None:
        """Return the rules of a kernel started through the stock Jupyter API (the config's
        `jupyter_api` profile), kept for its restarts; None where no registry chooses."""
        km = self.parent
        registry = getattr(km, "registry", None)
        if km is None or registry is None:
            return None
        cwd = Path(kwargs.get("cwd") or Path.cwd())
        rules: SandboxRules = registry.sandboxes.for_jupyter_api(cwd)
        update_launch_arguments(km, {SANDBOX_ARGUMENT: rules})
        return rules

    def _prepare_sandbox(self, rules: SandboxRules) -> None:
        km = self.parent
        assert km is not None
        try:
            self.sandbox = SandboxLaunch.prepare(rules, km.kernel_id, self.sandbox)
        except SandboxUnavailable as e:
            raise Unavailable(str(e)) from None
        use_ipc(km, self.sandbox.ipc_prefix)

    def _use_own_sockets(self) -> None:
        """Give an unconfined local kernel ipc sockets in a dir of its own (once: restarts
        reuse them, as a client's connection expects)."""
        km = self.parent
        assert km is not None
        if km.transport != "tcp" or km.shell_port:
            return  # chosen already (a restart, or a kernel an earlier gateway started)
        use_ipc(km, ipc_prefix(self._unconfined_dir()))

    def _unconfined_dir(self) -> Path:
        """Return an unconfined kernel's own dir (Unavailable when the root is not private)."""
        assert self.parent is not None
        try:
            return unconfined_kernel_dir(self.parent.kernel_id)
        except SandboxUnavailable as e:
            raise Unavailable(str(e)) from None

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        """Launch the kernel with stdin on /dev/null and its output in a log of its own."""
        self.log_path = self._output_log()
        assert self.parent is not None
        markers, kernel_id = launch_markers(self.parent), str(self.kernel_id)
        connection_file = self.parent.connection_file
        if markers is not None:  # a gateway killed from here on leaves a trace
            markers.launching(kernel_id, connection_file)
        with self.log_path.open("ab") as output:
            kwargs.update(stdin=subprocess.DEVNULL, stdout=output, stderr=output)
            if self.sandbox is None:
                info = await super().launch_kernel(cmd, **kwargs)  # Popen; nothing awaited after
            else:
                launch = super().launch_kernel  # Popen, on the entry's thread, in a loop of its own
                info = self.sandbox.spawn(
                    cmd,
                    lambda argv, fds: asyncio.run(launch(argv, **kwargs, pass_fds=fds)),
                    cwd=Path(kwargs.get("cwd") or Path.cwd()),
                    connection_file=Path(connection_file),
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
        if self.sandbox is not None:
            self.rules = self.sandbox.rules
        self.own_packages = provisioner_info.get("own_packages")  # None: its next start decides

    def _is_ours(self) -> bool:
        """Return whether the recorded pid is still the process this provisioner launched."""
        return self.identity is not None and self.identity.is_alive()

    def is_ours(self) -> bool:
        """Return whether the kernel process is alive and is the one recorded (not a reused pid)."""
        if self.process is not None:
            return self.process.poll() is None
        return self._is_ours()

    def ending(self) -> str:
        """Return a sentence saying how the kernel process ended."""
        ended_by_sandbox = self.sandbox.ending() if self.sandbox is not None else None
        if ended_by_sandbox is not None:
            return ended_by_sandbox
        if self.process is not None:
            status = self.process.poll()
            if self.sandbox is not None and self.sandbox.has_init:  # bwrap's own status
                status = command_status(status)
            return exit_reason(status)
        return (
            "the kernel process ended (its exit status is unknown: this gateway took it "
            "back from an earlier one)"
        )

    # -- the process, by pid when it is not our child -----------------------------------------

    async def poll(self) -> int | None:
        """Return None while the kernel runs, else its exit status (-1 if unknown)."""
        if not self.taken_back:
            status: int | None = await super().poll()
            return status
        return None if self._is_ours() else -1

    async def wait(self) -> int | None:
        """Return the exit status once the kernel process has ended (-1 if unknown)."""
        if not self.taken_back:
            status: int | None = await super().wait()
            return status
        assert self.identity is not None
        await self.identity.ended()
        return -1

    async def send_signal(self, signum: int) -> None:
        """Signal the kernel's process group, only if the pid is still that kernel (inside a
        sandbox: its init's, which SIGKILL ends with everything in it)."""
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
        """Kill the kernel (its process group; a sandbox's init)."""
        if self.sandbox is not None and self.sandbox.has_init:
            self.sandbox.signal(signal.SIGKILL)
            return
        if not self.taken_back:
            await super().kill(restart=restart)
            return
        await self.send_signal(signal.SIGKILL)

    async def terminate(self, restart: bool = False) -> None:
        """Terminate the kernel (its process group; in a sandbox, its init's)."""
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
        markers = launch_markers(self.parent)
        if markers is not None:
            markers.forget(str(self.kernel_id))
        if self.taken_back and not self._is_ours():
            self.identity = None
        if not restart:
            remove_sockets(self.connection_info)
        if self.sandbox is not None and not restart:
            await self.sandbox.close_network()
            await asyncio.to_thread(self.sandbox.remove)  # waits for the sandbox to empty


def launch_markers(km: object) -> LaunchMarkers | None:
    """Return the launch markers of the gateway whose kernel manager `km` is (None for a
    kernel manager of no gateway)."""
    markers = getattr(getattr(km, "registry", None), "launches", None)
    return markers if isinstance(markers, LaunchMarkers) else None


def exit_reason(returncode: int | None) -> str:
    """Return a sentence saying how a kernel process ended."""
    if returncode is None:
        return "the kernel process stopped responding"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the kernel process was killed by {name}"
    return f"the kernel process exited with code {returncode}"


def json_safe(value: Any) -> Any:
    """Return `value` with bytes (a connection key) as text, for a JSON file."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    return value


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


def process_ending(km: object) -> str:
    """Return a sentence saying how the kernel's process ended."""
    ending = getattr(km, "ending", "")
    if ending:  # a kernel on an upstream: what the upstream said
        return str(ending)
    provisioner = getattr(km, "provisioner", None)
    if isinstance(provisioner, ResidentProvisioner):
        return provisioner.ending()
    process = getattr(provisioner, "process", None)
    return exit_reason(process.poll() if process is not None else None)
