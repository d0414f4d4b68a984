"""A real gateway whose kernels run under the shipped default profile (workspace): its state,
config and the project its kernels work in lie outside the host's /tmp, which every sandbox
replaces with its own; its default can be changed for a while, and its kernels are stopped."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.cells import KERNELS
from tests.support.gateways import GatewayProcess

SHIPPED_DEFAULT = "workspace"
# A cell whose output tells its kernel process from any other, confined or not: its pid (in the
# sandbox's own pid namespace, where every kernel has the same) and its start in ticks since boot.
PROCESS_CELL = (
    "import os; os.getpid(), open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]"
)


@dataclass
class SandboxedGateway:
    """A started gateway, the directory holding its state and config, and its kernels' project."""

    gateway: GatewayProcess
    root: Path

    @property
    def project(self) -> Path:
        """Return the directory its kernels work in (writable under workspace and strict)."""
        return self.root / "project"

    @property
    def config_file(self) -> Path:
        """Return its sandbox.toml, which it reads again when the file changes."""
        return self.root / "config" / "loomgate" / "sandbox.toml"

    @contextmanager
    def default(self, profile: str) -> Iterator[None]:
        """Make `profile` the gateway's default for new kernels while inside."""
        self.config_file.write_text(f'default = "{profile}"\n')
        try:
            yield
        finally:
            self.config_file.write_text(f'default = "{SHIPPED_DEFAULT}"\n')

    def stop_kernels(self) -> None:
        """Stop every kernel the gateway runs (tests share it, and reuse kernel names)."""
        with httpx.Client(base_url=self.gateway.url, headers=self.gateway.headers) as http:
            listed = http.get(KERNELS, timeout=30)
            assert listed.status_code == 200, listed.text
            for kernel in listed.json()["kernels"]:
                if kernel["alive"]:
                    http.delete(f"{KERNELS}/{kernel['id']}", timeout=60)


@contextmanager
def sandbox_root() -> Iterator[Path]:
    """Yield a new directory outside the host's /tmp (which a sandbox replaces) with a
    `project` and a `config/loomgate` for a gateway; removed afterwards."""
    root = Path("/var/tmp") / f"loomgate-sandbox-{uuid.uuid4().hex[:8]}"
    (root / "project").mkdir(parents=True)
    (root / "config" / "loomgate").mkdir(parents=True)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def confined_gateway(root: Path, *, token: str | None = None) -> GatewayProcess:
    """Return a (not started) gateway whose kernels get the shipped default profile, with its
    state and config in `root` (from `sandbox_root`) and its kernels working in its `project`;
    with `token`, one it reads from a variable, so that restarts keep it."""
    (root / "config" / "loomgate" / "sandbox.toml").write_text(f'default = "{SHIPPED_DEFAULT}"\n')
    env = {"XDG_CONFIG_HOME": str(root / "config")}
    extra_args = []
    if token is not None:
        env["LOOMGATE_TEST_TOKEN"] = token
        extra_args = ["--token-env", "LOOMGATE_TEST_TOKEN"]
    return GatewayProcess(root / "state", env=env, extra_args=extra_args, cwd=root / "project")


@contextmanager
def sandboxed_gateway() -> Iterator[SandboxedGateway]:
    """Yield a started gateway with the shipped default profile, under /var/tmp; stopped with
    its kernels, its directory removed."""
    with sandbox_root() as root:
        gateway = GatewayProcess(root / "state", env={"XDG_CONFIG_HOME": str(root / "config")})
        place = SandboxedGateway(gateway, root)
        place.config_file.write_text(f'default = "{SHIPPED_DEFAULT}"\n')
        try:
            gateway.start()
            yield place
        finally:
            gateway.stop()


@dataclass
class GatewayHome:
    """A root under /var/tmp for a gateway with a fake HOME: its `home`, its XDG_CONFIG_HOME
    `config` (sandbox.toml naming the shipped default), its kernels' `project`."""

    root: Path

    @property
    def home(self) -> Path:
        """Return the gateway's HOME (read-only to a confined kernel)."""
        return self.root / "home"

    @property
    def config(self) -> Path:
        """Return the gateway's XDG_CONFIG_HOME."""
        return self.root / "config"

    @property
    def project(self) -> Path:
        """Return the kernels' working directory."""
        return self.root / "project"


@contextmanager
def gateway_home(name: str) -> Iterator[GatewayHome]:
    """Yield a new GatewayHome with its dirs made; removed afterwards."""
    here = GatewayHome(Path("/var/tmp") / f"loomgate-{name}-{uuid.uuid4().hex[:8]}")
    for directory in (here.home, here.project, here.config / "loomgate"):
        directory.mkdir(parents=True)
    (here.config / "loomgate" / "sandbox.toml").write_text(f'default = "{SHIPPED_DEFAULT}"\n')
    try:
        yield here
    finally:
        shutil.rmtree(here.root, ignore_errors=True)


@contextmanager
def home_gateway(place: GatewayHome) -> Iterator[GatewayProcess]:
    """Yield a started gateway with `place`'s HOME and config, its state in `place`; stopped
    with its kernels."""
    env = {"HOME": str(place.home), "XDG_CONFIG_HOME": str(place.config)}
    started = GatewayProcess(place.root / "state", env=env)
    try:
        yield started.start()
    finally:
        started.stop()
