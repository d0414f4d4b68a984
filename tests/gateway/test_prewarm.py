"""Prewarmed kernels: a new kernel is taken from a pool of started, idle ones; a pool kernel is
no one's until taken (in no list), gets its directory and environment at claim, numbers from
In [1], and ends with the gateway however it exits (under the default profile too: bwrap, the
sandbox's init and the kernel)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import httpx

from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency.resident import RESIDENT_FILE
from loomgate.gateway.sandbox.policy.state_dirs import note_state_dir
from tests.gateway.residency.test_residency import API, created, output
from tests.support.cells import submit
from tests.support.gateways import (
    GatewayProcess,
    child_pids,
    client,
    resident_kernels,
    terminated_as_a_kernel_starts,
    wait_gone,
)

POOL_TIMEOUT = 60.0


async def pooled(http: httpx.AsyncClient, *, other_than: int | None = None) -> dict[str, Any]:
    """Return the one prewarmed kernel the gateway reports, once it is ready (and, given
    `other_than`, once it is a new one). No event announces it: the report is polled."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + POOL_TIMEOUT
    while loop.time() < deadline:
        info = (await http.get("/api/loomgate/info")).json()
        ready = [k for k in info["prewarmed"] if k["pid"] != other_than]
        if ready:
            [kernel] = ready
            return dict(kernel)
        await asyncio.sleep(0.05)
    raise AssertionError("no prewarmed kernel became ready")


async def test_a_new_kernel_is_the_prewarmed_one_moved_into_place(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    fresh_gateway.prewarm = 1
    fresh_gateway.start()
    project = tmp_path / "my project"
    project.mkdir()
    async with client(fresh_gateway) as http:
        ready = await pooled(http)
        info = (await http.get("/api/loomgate/info")).json()
        assert info["prewarm"] == 1 and ready["kernel_spec"] == info["default_kernel_spec"]
        assert ready["rss_bytes"] > 1_000_000
        # No one's yet: in neither loomgate's nor Jupyter's lists, unknown by its id.
        assert (await http.get(API)).json()["kernels"] == []
        assert (await http.get("/api/kernels")).json() == []
        kernel = await created(http, name="work", cwd=str(project), env={"LOOMGATE_SEEN": "yes"})
        assert await output(http, "work", "import os; os.getpid()") == str(ready["pid"])
        assert await output(http, "work", "os.getcwd()") == repr(str(project))
        assert await output(http, "work", "os.environ['LOOMGATE_SEEN']") == "'yes'"
        listed = (await http.get("/api/kernels")).json()
        assert [k["id"] for k in listed] == [kernel]
        # The pool refills with a new kernel; a reset restarts `work` where it was moved.
        await pooled(http, other_than=ready["pid"])
        assert (await http.post(f"{API}/work/reset")).status_code == 200
        assert await output(http, "work", "import os; os.getcwd()") == repr(str(project))
        assert await output(http, "work", "os.environ['LOOMGATE_SEEN']") == "'yes'"


async def test_numbering_starts_at_one(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.prewarm = 1
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        ready = await pooled(http)
        await created(http, name="counted")
        code = "import os; os.getpid()"
        first = (await submit(http, "counted", code))["execution"]
        assert first["number"] == 1
        # IPython's own numbering: the first cell is In[1] and its result Out[1] (_1).
        assert await output(http, "counted", "_1, In[1]") == f"({ready['pid']}, {code!r})"


def sandbox_of(pid: int) -> set[ProcessIdentity]:
    """Return a confined pool kernel's processes: bwrap (the pid the pool reports it launched),
    the sandbox's init and the kernel (and its network's bridge)."""
    processes = {p for p in map(ProcessIdentity.of, {pid, *child_pids(pid)}) if p is not None}
    assert len(processes) >= 3, processes
    return processes


def pids(processes: Iterable[ProcessIdentity]) -> set[int]:
    """Return the pids of `processes`."""
    return {process.pid for process in processes}


async def test_pool_kernels_end_with_the_gateway_and_are_never_taken_back(
    confined_gateway: GatewayProcess,
) -> None:
    gateway = confined_gateway  # the default profile: a pool kernel is a bubblewrap sandbox
    gateway.prewarm = 1
    gateway.start()
    async with client(gateway) as http:
        first = await pooled(http)
        kept = await created(http, name="kept")
        second = await pooled(http, other_than=first["pid"])
    resident = json.loads((gateway.state_dir / "kernels" / kept / RESIDENT_FILE).read_text())
    # `kept` is the first pool kernel; each reports bubblewrap's pid as the one it launched.
    assert resident["provisioner"]["pid"] == first["launched_pid"]
    firsts, seconds = sandbox_of(first["launched_pid"]), sandbox_of(second["launched_pid"])
    # SIGTERM keeps the named kernel (the one claimed from the pool) and ends the pool's.
    gateway.signal(signal.SIGTERM)
    assert all(process.is_alive() for process in firsts)
    assert wait_gone(pids(seconds), 30) == set()
    # SIGKILL leaves the pool kernel running: the next gateway ends it, and takes back only `kept`.
    gateway.start()
    async with client(gateway) as http:
        third = await pooled(http)
    orphans = sandbox_of(third["launched_pid"])
    gateway.kill()
    assert ProcessIdentity.of(third["launched_pid"]) in resident_kernels(gateway.state_dir)
    assert all(process.is_alive() for process in orphans)
    gateway.start()
    assert wait_gone(pids(orphans), 30) == set()  # bwrap, init and kernel: none left
    async with client(gateway) as http:
        names = [k["name"] for k in (await http.get(API)).json()["kernels"]]
        assert names == ["kept"]
        assert await output(http, "kept", "40 + 2") == "42"
    assert all(process.is_alive() for process in firsts)  # taken back, not restarted


async def test_a_pool_kernel_that_sees_a_state_dir_noted_since_is_not_claimed(
    confined_gateway: GatewayProcess, confined_root: Path
) -> None:
    gateway = confined_gateway
    gone, other = confined_root / "gone-state", confined_root / "other-state"
    gone.mkdir()
    note_state_dir(gone)  # another gateway's, hidden from every pool kernel started from now on
    gateway.prewarm = 1
    gateway.start()
    async with client(gateway) as http:
        first = await pooled(http)
        gone.rmdir()  # what a pool kernel hides and is gone does not keep it from being claimed
        claimed = await created(http, name="claimed")
        assert launched_pid(gateway, claimed) == first["launched_pid"]
        second = await pooled(http, other_than=first["pid"])
        seconds = sandbox_of(second["launched_pid"])
        other.mkdir()
        (other / "records").write_text("another gateway's")
        note_state_dir(other)  # the second pool kernel can read it: it is stopped, not claimed
        fresh = await created(http, name="fresh")
        assert launched_pid(gateway, fresh) != second["launched_pid"]
        assert wait_gone(pids(seconds), 30) == set()
        seen = f"import os; os.path.exists({str(other / 'records')!r})"
        assert await output(http, "fresh", seen) == "False"


def launched_pid(gateway: GatewayProcess, kernel_id: str) -> int:
    """Return the pid a kernel's provisioner launched, as its resident.json says."""
    state = json.loads((gateway.state_dir / "kernels" / kernel_id / RESIDENT_FILE).read_text())
    return int(state["provisioner"]["pid"])


async def test_a_gateway_stopped_as_its_pool_kernel_starts_leaves_no_kernel(
    tmp_path: Path,
) -> None:
    # SIGTERM as soon as the pool's kernel process exists, while its start is still under way
    # (cancelling that start used to leave the process unknown to the gateway, running on).
    # Three gateways: the first start of a run is slow enough to finish its kernel's start.
    for attempt in range(3):
        gateway = GatewayProcess(tmp_path / f"state{attempt}", prewarm=1)
        left = terminated_as_a_kernel_starts(gateway)
        assert left == set(), "a prewarmed kernel outlived its gateway"


# A kernel that takes a second before it becomes ipykernel: its launcher, then the kernel.
SLOW_LAUNCHER = """\
import os, sys, time
time.sleep(1.0)
os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", *sys.argv[1:]])
"""


def slow_kernel_spec(root: Path) -> Path:
    """Write a kernel spec `python3` (the default one, then) whose process is ipykernel only
    after a second; return JUPYTER_PATH."""
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True)
    launcher = root / "slow_launcher.py"
    launcher.write_text(SLOW_LAUNCHER)
    argv = [sys.executable, str(launcher), "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "slow", "language": "python"})
    )
    return root


async def test_a_pool_kernel_is_ready_only_once_it_answers(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    fresh_gateway.prewarm = 1
    fresh_gateway.env = {"JUPYTER_PATH": str(slow_kernel_spec(tmp_path / "jupyter"))}
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        ready = await pooled(http)
        # Listed only once it is ipykernel and answered: no longer its sleeping launcher.
        cmdline = await asyncio.to_thread(Path(f"/proc/{ready['pid']}/cmdline").read_bytes)
        assert b"ipykernel_launcher" in cmdline.split(b"\0"), cmdline
        await created(http, name="claimed")
        assert await output(http, "claimed", "import os; os.getpid()") == str(ready["pid"])


async def test_no_pool_when_prewarm_is_zero(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.start()  # the tests' gateways prewarm nothing unless asked
    async with client(fresh_gateway) as http:
        await created(http, name="cold")
        info = (await http.get("/api/loomgate/info")).json()
        assert (info["prewarm"], info["prewarmed"]) == (0, [])
    assert len(fresh_gateway.kernel_pids()) == 1
