"""A person's real JupyterLab (or plain Jupyter Server) for tests: its own Jupyter config,
runtime and data dirs, loomgate's extension enabled with the documented command, always
stopped with its kernels."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.gateways import free_port, wait_gone

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def jupyter_environment(home: Path) -> dict[str, str]:
    """Return an environment whose Jupyter and loomgate dirs all live under `home`."""
    return {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "jupyter-config"),
        "JUPYTER_RUNTIME_DIR": str(home / "jupyter-runtime"),
        "JUPYTER_DATA_DIR": str(home / "jupyter-data"),
        # The person's dir (these temporary ones) before the environment's: Jupyter otherwise
        # reads a virtual environment's own first, which the tests must not change.
        "JUPYTER_PREFER_ENV_PATH": "0",
        "LOOMGATE_STATE_DIR": str(home / "loomgate-state"),
        "XDG_CONFIG_HOME": str(home / "config"),
        # The servers' own kernels keep IPython's history here, not in one file for the suite.
        "IPYTHONDIR": str(home / "ipython"),
    }


def loomgate_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Return the finished `loomgate *args` (in `env`)."""
    return subprocess.run(
        [sys.executable, "-m", "loomgate.translator.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


class JupyterServerProcess:
    """`jupyter lab` (app "lab") or `jupyter server` (app "server") in dirs of its own."""

    def __init__(
        self, home: Path, *, app: str = "lab", extension: bool = True, agents: bool = False
    ) -> None:
        """`agents`: the person lets agents into their notebooks' kernels (sandbox.toml's
        `jupyter_api_open_to_agents`), closed to them otherwise."""
        self.home = home
        self.app = app
        self.env = jupyter_environment(home)
        self.root = home / "notebooks"
        self.root.mkdir(parents=True, exist_ok=True)
        self.token = "jupyter-test-token"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.kernel_pids: set[int] = set()
        if extension:
            enabled = loomgate_cli(self.env, "jupyter", "enable")  # the README's command
            assert enabled.returncode == 0, enabled.stderr
        if agents:
            config = Path(self.env["XDG_CONFIG_HOME"]) / "loomgate"
            config.mkdir(parents=True, exist_ok=True)
            (config / "sandbox.toml").write_text("jupyter_api_open_to_agents = true\n")

    @property
    def headers(self) -> dict[str, str]:
        """Return the request headers carrying the server's token."""
        return {"Authorization": f"token {self.token}"}

    @property
    def runtime_dir(self) -> Path:
        """Return where the server writes its jpserver-PID.json."""
        return Path(self.env["JUPYTER_RUNTIME_DIR"])

    def start(self) -> None:
        """Start the server and return once it answers /api/status."""
        module = "jupyterlab" if self.app == "lab" else "jupyter_server"
        command = [
            sys.executable,
            "-m",
            module,
            "--no-browser",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.allow_root=True",
        ]
        self.process = start_server(
            command,
            self.env,
            self.home / f"{self.app}.log",
            ready_url=f"{self.url}/api/status",
            headers=self.headers,
            label=f"jupyter {self.app}",
            cwd=self.home,  # jupyter-collaboration keeps its .jupyter_ystore.db in the cwd
        )

    def write_lab_settings(self, plugin: str, settings: dict[str, Any]) -> None:
        """Write the person's JupyterLab settings of `plugin` (an id such as
        "@jupyterlab/apputils-extension:notification") where JupyterLab reads them: the
        user-settings dir in this server's own Jupyter config dir."""
        package, name = plugin.rsplit(":", 1)
        directory = Path(self.env["JUPYTER_CONFIG_DIR"]) / "lab" / "user-settings" / package
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{name}.jupyterlab-settings").write_text(json.dumps(settings))

    def log_tail(self, lines: int = 30) -> str:
        """Return the end of the server's log."""
        return log_tail(self.home / f"{self.app}.log", lines)

    def open_notebook(self, path: str) -> dict[str, Any]:
        """Return the session JupyterLab creates when the person opens notebook `path`."""
        body = {
            "path": path,
            "name": Path(path).name,
            "type": "notebook",
            "kernel": {"name": "python3"},
        }
        r = httpx.post(f"{self.url}/api/sessions", json=body, headers=self.headers, timeout=60)
        assert r.status_code == 201, r.text
        session: dict[str, Any] = r.json()
        self.note_kernels()
        return session

    def note_kernels(self) -> None:
        """Remember the pids of the server's kernel processes (to check they end with it)."""
        try:
            r = httpx.get(f"{self.url}/api/kernels", headers=self.headers, timeout=30)
        except httpx.HTTPError:
            return  # not answering: the kernels noted so far are all there is to check
        for kernel in r.json() if r.status_code == 200 else []:
            self.kernel_pids.update(pids_of_kernel(kernel["id"]))

    def stop(self) -> None:
        """Stop the server (SIGTERM: it shuts its kernels down), then check they are gone."""
        process, self.process = self.process, None
        if process is None:
            return
        self.note_kernels()
        terminate(process, self.kernel_pids, f"jupyter {self.app}")


def log_tail(path: Path, lines: int = 30) -> str:
    """Return the last `lines` lines of the log at `path` ("" before it exists)."""
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def start_server(
    command: list[str],
    env: dict[str, str],
    log: Path,
    *,
    ready_url: str,
    headers: dict[str, str],
    label: str,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Return a started server process once GET `ready_url` answers 200 (RuntimeError with the
    end of its log if it exits first or does not answer within START_TIMEOUT)."""
    with log.open("ab") as output:
        process = subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{label} exited: {log_tail(log)}")
        try:
            if httpx.get(ready_url, headers=headers).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    process.kill()
    process.wait()
    raise RuntimeError(f"{label} did not start: {log_tail(log)}")


def terminate(process: subprocess.Popen[bytes], kernel_pids: set[int], label: str) -> None:
    """SIGTERM a Jupyter server (it shuts its kernels down), then check `kernel_pids` are gone
    (any left are killed, and the check fails)."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    left = wait_gone(kernel_pids, STOP_TIMEOUT)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"kernels outlived {label}: {left}"


def pids_of_kernel(kernel_id: str) -> list[int]:
    """Return the pids of processes whose command line names `kernel_id`'s connection file."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if f"kernel-{kernel_id}.json".encode() in command:
            found.append(int(proc.name))
    return found


def runtime_info(server: JupyterServerProcess) -> dict[str, Any]:
    """Return the server's jpserver-PID.json."""
    assert server.process is not None
    path = server.runtime_dir / f"jpserver-{server.process.pid}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data
