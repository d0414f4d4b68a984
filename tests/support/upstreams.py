"""Upstream servers for upstream mode, started on loopback: a stock Jupyter Server and Jupyter
Kernel Gateway, each in dirs of its own and stopped with its kernels."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateways import GatewayProcess, free_port, wait_gone
from tests.support.jupyter_lab import (
    jupyter_environment,
    pids_of_kernel,
    start_server,
    terminate,
)

STOP_TIMEOUT = 30.0
TOKEN_VAR = "LOOMGATE_TEST_UPSTREAM_TOKEN"
KINDS = ("jupyter_server", "kernel_gateway", "enterprise_gateway")
# Enterprise Gateway's own environment (its dependencies cannot share loomgate's).
ENTERPRISE_GATEWAY = Path(__file__).parents[1] / "upstreams" / "enterprise_gateway"


class UpstreamProcess:
    """A Jupyter Server (`jupyter_server`), Kernel Gateway (`kernel_gateway`) or Enterprise
    Gateway with its local process proxy (`enterprise_gateway`) on a port of its own, with a
    token; started again on the same port by `start` after `kill`."""

    def __init__(
        self,
        home: Path,
        kind: str,
        *,
        token: str = "upstream-test-token",
        max_kernels: int | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.home = home
        self.extra_args = extra_args  # more of its command line's options
        self.max_kernels = max_kernels  # Kernel Gateway's limit on running kernels
        self.kind = kind
        # Enterprise Gateway refuses kernels to root unless told whom to refuse.
        self.env = {**jupyter_environment(home), "EG_UNAUTHORIZED_USERS": "nobody"}
        self.root = home / "root"
        self.root.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.kernel_pids: set[int] = set()

    @property
    def headers(self) -> dict[str, str]:
        """Return the request headers carrying the upstream's token."""
        return {"Authorization": f"token {self.token}"}

    def command(self) -> list[str]:
        """Return the command line that starts this upstream."""
        if self.kind == "enterprise_gateway":
            program = ENTERPRISE_GATEWAY / ".venv" / "bin" / "jupyter-enterprisegateway"
            if not program.exists():
                raise RuntimeError(
                    f"Enterprise Gateway is not installed: run `uv sync --frozen --project "
                    f"{ENTERPRISE_GATEWAY.relative_to(Path.cwd())}` (.ci/run does)"
                )
            limit = [f"--EnterpriseGatewayApp.max_kernels={self.max_kernels}"]
            return [
                str(program),
                "--ip=127.0.0.1",
                f"--port={self.port}",
                "--port_retries=0",
                f"--EnterpriseGatewayApp.auth_token={self.token}",
                "--EnterpriseGatewayApp.list_kernels=True",
                *(limit * bool(self.max_kernels)),
            ]
        if self.kind == "kernel_gateway":
            return [
                sys.executable,
                "-m",
                "kernel_gateway",
                "--KernelGatewayApp.ip=127.0.0.1",
                f"--KernelGatewayApp.port={self.port}",
                "--KernelGatewayApp.port_retries=0",
                f"--KernelGatewayApp.auth_token={self.token}",
                "--JupyterWebsocketPersonality.list_kernels=True",  # as a shared deployment would
                *(
                    [f"--KernelGatewayApp.max_kernels={self.max_kernels}"]
                    if self.max_kernels
                    else []
                ),
            ]
        return [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.allow_root=True",
            *self.extra_args,
        ]

    def start(self) -> UpstreamProcess:
        """Start the upstream and return once it lists its kernel specs."""
        self.process = start_server(
            self.command(),
            self.env,
            self.home / f"{self.kind}.log",
            ready_url=f"{self.url}/api/kernelspecs",
            headers=self.headers,
            label=self.kind,
            cwd=self.root,
        )
        return self

    def kernels(self) -> list[str]:
        """Return the ids of the kernels the upstream runs."""
        r = httpx.get(f"{self.url}/api/kernels", headers=self.headers, timeout=30)
        assert r.status_code == 200, r.text
        ids = [str(kernel["id"]) for kernel in r.json()]
        for kernel_id in ids:
            self.kernel_pids.update(pids_of_kernel(kernel_id))
        return ids

    def start_kernel(self) -> str:
        """Return the id of a kernel started directly on the upstream (not through loomgate)."""
        r = httpx.post(
            f"{self.url}/api/kernels", json={"name": "python3"}, headers=self.headers, timeout=60
        )
        assert r.status_code == 201, r.text
        kernel_id = str(r.json()["id"])
        self.kernel_pids.update(pids_of_kernel(kernel_id))
        return kernel_id

    def delete_kernel(self, kernel_id: str) -> None:
        """Stop one of its kernels directly on the upstream (as someone else would)."""
        r = httpx.delete(f"{self.url}/api/kernels/{kernel_id}", headers=self.headers, timeout=60)
        assert r.status_code == 204, r.text

    def kill(self) -> None:
        """SIGKILL the upstream; its kernels exit as their parent is gone."""
        process, self.process = self.process, None
        assert process is not None
        self.kernels()
        process.kill()
        process.wait(STOP_TIMEOUT)
        left = wait_gone(self.kernel_pids, STOP_TIMEOUT)
        for pid in left:
            os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stop the upstream (SIGTERM: it shuts its kernels down), then check they are gone."""
        process, self.process = self.process, None
        if process is None:
            return
        # Not answering: the kernels noted so far are all there is to check.
        with contextlib.suppress(httpx.HTTPError, AssertionError):
            self.kernels()
        terminate(process, self.kernel_pids, self.kind)


def upstream_gateway(state_dir: Path, url: str, token: str | None, *extra: str) -> GatewayProcess:
    """Return a (not yet started) gateway in upstream mode on `url`, its token in TOKEN_VAR."""
    args = ["--upstream", url, *extra]
    env: dict[str, str] = {}
    if token is not None:
        args += ["--upstream-token-env", TOKEN_VAR]
        env[TOKEN_VAR] = token
    state_dir.mkdir(parents=True, exist_ok=True)
    return GatewayProcess(state_dir, extra_args=args, env=env)


@contextlib.contextmanager
def running(home: Path, kind: str, **options: Any) -> Iterator[UpstreamProcess]:
    """Yield a started upstream of `kind` in `home`; stopped (with its kernels) afterwards."""
    server = UpstreamProcess(home, kind, **options)
    try:
        yield server.start()
    finally:
        server.stop()
