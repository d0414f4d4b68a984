"""A server stopped while a kernel is still starting stops promptly and ends that kernel: in a
person's Jupyter with `use_pending_kernels` (the sessions API returns before the kernel answers),
as jupyter_server's own sessions tests stop it, and the gateway's `gateway stop` (its kernel
under the default profile: bwrap, the sandbox's init and the kernel, all ended)."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess, wait_gone
from tests.support.jupyter_lab import STOP_TIMEOUT, JupyterServerProcess, pids_of_kernel
from tests.support.sandboxed_gateways import confined_gateway

# A stop that waited for the kernel would take until the gate opens (never) or loomgate's start
# timeout (60 s); a prompt one takes what jupyter_client's shutdown of the process takes.
PROMPT_STOP = 10.0


def gated_kernel_spec(data_dir: Path, gate: Gate) -> str:
    """Install a kernel spec whose process answers nothing until `gate` opens; return its name."""
    spec = data_dir / "kernels" / "gated"
    spec.mkdir(parents=True)
    wait = f'while [ ! -e "{gate.path}" ]; do sleep 0.02; done'
    argv = ["sh", "-c", f'{wait}; exec "{sys.executable}" -m ipykernel_launcher -f "$0"']
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": [*argv, "{connection_file}"], "display_name": "gated"})
    )
    return "gated"


def kernel_processes(kernel_id: str) -> set[int]:
    """Return the kernel's processes once it has one (within 30 s)."""
    deadline = time.monotonic() + 30
    while not (pids := set(pids_of_kernel(kernel_id))) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pids, "the kernel's process never started"
    return pids


def test_jupyter_with_pending_kernels_stops_at_once_while_a_kernel_starts(
    tmp_path: Path, gate: Gate
) -> None:
    server = JupyterServerProcess(tmp_path / "person", app="server")
    config = Path(server.env["JUPYTER_CONFIG_DIR"]) / "jupyter_server_config.json"
    config.write_text(json.dumps({"AsyncMappingKernelManager": {"use_pending_kernels": True}}))
    spec = gated_kernel_spec(Path(server.env["JUPYTER_DATA_DIR"]), gate)
    pids: set[int] = set()
    try:
        server.start()
        body = {"path": "nb.ipynb", "type": "notebook", "kernel": {"name": spec}}
        r = httpx.post(f"{server.url}/api/sessions", json=body, headers=server.headers, timeout=60)
        assert r.status_code == 201, r.text
        kernel = r.json()["kernel"]
        assert kernel["execution_state"] == "starting"  # pending: the reply did not wait
        pids = kernel_processes(kernel["id"])
        process, server.process = server.process, None
        assert process is not None
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        process.wait(STOP_TIMEOUT + PROMPT_STOP)
        took = time.monotonic() - began
        assert took < PROMPT_STOP, f"the server took {took:.1f} s to stop"
        assert not wait_gone(pids, 5), "the starting kernel outlived the server"
        log = server.log_tail(200)
        assert "InvalidStateError" not in log and "invalid state" not in log, log
    finally:
        gate.open()
        server.stop()
        for pid in wait_gone(pids, 5):
            __import__("os").kill(pid, signal.SIGKILL)


def started_in_its_sandbox(gateway: GatewayProcess) -> bool:
    """Return whether the gateway's gated kernel runs in its sandbox: bwrap, the sandbox's init
    and, under them, the kernel's own process (still waiting for its gate)."""
    commands = []
    for pid in gateway.kernel_pids():
        with contextlib.suppress(OSError):
            commands.append(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"))
    sandbox = [c for c in commands if c[0].endswith(b"bwrap")]
    return len(sandbox) == 2 and any(c[0] == b"sh" for c in commands)


@pytest.mark.parametrize("pending", [False, True], ids=["stock", "pending-kernels"])
def test_gateway_stop_ends_a_kernel_still_starting_at_once(
    tmp_path: Path, confined_root: Path, pending: bool
) -> None:
    gate = Gate(confined_root)  # where the confined kernel sees it (not in /tmp)
    jupyter_config = tmp_path / "jupyter-config"
    jupyter_config.mkdir()
    if pending:  # a person's jupyter_config.json, which loomgate-gateway reads too
        jupyter_config.joinpath("jupyter_config.json").write_text(
            json.dumps({"AsyncMappingKernelManager": {"use_pending_kernels": True}})
        )
    data = tmp_path / "jupyter-data"
    spec = gated_kernel_spec(data, gate)
    gateway = confined_gateway(confined_root)
    gateway.env |= {"JUPYTER_CONFIG_DIR": str(jupyter_config), "JUPYTER_DATA_DIR": str(data)}
    created: list[httpx.Response] = []
    try:
        gateway.start()

        def create() -> None:
            body = {"name": "gated", "kernel_spec": spec}  # the default profile
            url = f"{gateway.url}/api/loomgate/kernels"
            created.append(httpx.post(url, json=body, headers=gateway.headers, timeout=90))

        creating = threading.Thread(target=create)
        creating.start()
        deadline = time.monotonic() + 30
        while not started_in_its_sandbox(gateway) and time.monotonic() < deadline:
            time.sleep(0.02)  # nothing announces a process's start
        pids = gateway.kernel_pids()
        assert started_in_its_sandbox(gateway), f"the kernel's process never started: {pids}"
        gateway.kill_soon()  # its kernels noted: `stop` checks none outlives it
        began = time.monotonic()
        r = httpx.post(
            f"{gateway.url}/api/loomgate/shutdown",
            headers=gateway.headers,
            json={"kernels": "stop"},
            timeout=10,
        )
        assert r.status_code == 202, r.text
        assert gateway.proc is not None
        gateway.proc.wait(STOP_TIMEOUT + PROMPT_STOP)
        took = time.monotonic() - began
        creating.join(30)
        assert took < PROMPT_STOP, f"the gateway took {took:.1f} s to stop"
        assert not wait_gone(pids, 5), "the starting kernel outlived `gateway stop`"
    finally:
        gate.open()
        gateway.stop()
