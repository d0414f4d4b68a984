"""A kernel's connection file (it holds the kernel's key) and its output log go when the kernel
ends, whoever started it: loomgate's API, the stock Jupyter API, an earlier gateway (taken back),
the pool; a kernel that died keeps its log beside its records."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import tempfile
from pathlib import Path

import httpx
from jupyter_client.asynchronous.client import AsyncKernelClient

from loomgate.gateway.residency.kernel_files import DEATH_LOG
from tests.support.cells import submit
from tests.support.gateways import GatewayProcess, client, wait_gone

API = "/api/loomgate/kernels"


def kernel_files(state_dir: Path) -> set[str]:
    """Return the kernel ids whose connection file or log lies in the state dir's runtime dir."""
    runtime = state_dir / "runtime"
    return {
        path.stem.removeprefix("kernel-")
        for path in [*runtime.glob("kernel-*.json"), *runtime.glob("kernel-*.log")]
    }


async def started(http: httpx.AsyncClient, name: str) -> str:
    """Return the id of a new kernel started through loomgate's API."""
    r = await http.post(API, json={"name": name})
    assert r.status_code == 201, r.text
    return str(r.json()["kernel"]["id"])


async def pid_of(http: httpx.AsyncClient, kernel: str) -> int:
    """Return the pid of a kernel's process, as the kernel says."""
    reply = await submit(http, kernel, "import os; os.getpid()", head=1)
    return int(reply["execution"]["output"]["head"][0]["text"])


async def test_connection_files_go_with_their_kernels(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.prewarm = 1
    state = fresh_gateway.state_dir
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        ours = {name: await started(http, name) for name in ("one", "two", "three", "dies")}
        r = await http.post("/api/kernels", json={})
        assert r.status_code == 201, r.text
        stock = r.json()["id"]
        dying_pid = await pid_of(http, "dies")
        pooled = kernel_files(state) - {*ours.values(), stock}
        assert pooled, "the pool's kernel has its files too"
        assert {*ours.values(), stock} <= kernel_files(state)

        # Stopped one by one, through either API: its files go at once.
        assert (await http.delete(f"{API}/one")).status_code == 200
        assert ours["one"] not in kernel_files(state)

    # Taken back by the next gateway (which did not write their connection files); one kernel
    # ends while no gateway runs.
    fresh_gateway.kill()
    os.killpg(dying_pid, signal.SIGKILL)
    assert not wait_gone({dying_pid}, 10)
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        assert ours["dies"] not in kernel_files(state)
        kept = state / "kernels" / ours["dies"] / DEATH_LOG
        assert kept.is_file(), "a kernel that died keeps its log beside its records"
        for path in pooled:  # the old gateway's pool kernel is ended by the new one
            assert path not in kernel_files(state)
        assert (await http.delete(f"{API}/two")).status_code == 200
        assert (await http.delete(f"/api/kernels/{stock}")).status_code == 204
        left = kernel_files(state)
        assert ours["two"] not in left and stock not in left
        assert ours["three"] in left

    fresh_gateway.stop()  # as `loomgate gateway stop` does: with its kernels
    assert kernel_files(state) == set(), sorted((state / "runtime").iterdir())


def listening_tcp_sockets() -> set[str]:
    """Return the socket inodes of every TCP socket listening on this machine."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), Path(table).open() as f:
            for row in list(f)[1:]:
                fields = row.split()
                if fields[3] == "0A":  # LISTEN
                    inodes.add(fields[9])
    return inodes


def sockets_of(pid: int) -> set[str]:
    """Return the socket inodes process `pid` holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = str(fd.readlink())
            if target.startswith("socket:["):
                inodes.add(target.removeprefix("socket:[").removesuffix("]"))
    return inodes


async def test_a_local_kernel_has_ipc_sockets_of_its_own_and_no_ports(
    fresh_gateway: GatewayProcess,
) -> None:
    fresh_gateway.start()
    runtime = fresh_gateway.state_dir / "runtime"
    async with client(fresh_gateway) as http:
        kernel = await started(http, "sockets")
        pid = await pid_of(http, kernel)
        info = json.loads((runtime / f"kernel-{kernel}.json").read_text())
        # No port to choose, so none another process can take before the kernel binds it.
        assert info["transport"] == "ipc"
        # (One TCP listener stays: ipykernel's pipe for subprocess output, which it binds
        # itself on a random port, retrying; the five channels were five listeners.)
        assert len(sockets_of(pid) & listening_tcp_sockets()) <= 1
        own = Path(info["ip"]).parent.parent
        assert own == Path(tempfile.gettempdir()) / f"loomgate-{os.getuid()}" / kernel[:13]
        assert stat.S_IMODE(own.stat().st_mode) == 0o700
        assert len(list(own.glob("ipc/k-*"))) == 5

        # Another Jupyter client reaches it through its connection file.
        other = AsyncKernelClient(connection_file=str(runtime / f"kernel-{kernel}.json"))
        other.load_connection_file()
        other.start_channels()
        try:
            reply = await other.execute_interactive("seen_by = 'another client'", timeout=30)
            assert reply["content"]["status"] == "ok"
        finally:
            other.stop_channels()

        # A restart keeps its sockets (a connected client reconnects to the same files).
        assert (await http.post(f"/api/kernels/{kernel}/restart")).status_code == 200
        reply = await submit(http, kernel, "'restarted'", head=1)
        assert reply["execution"]["output"]["head"][0]["text"] == "'restarted'"
        again = json.loads((runtime / f"kernel-{kernel}.json").read_text())
        assert again["ip"] == info["ip"]

        assert (await http.delete(f"{API}/{kernel}")).status_code == 200
        assert not own.exists()
