"""A gateway SIGKILLed within milliseconds of its start, of its prewarmed kernel's launch, or of
a claim of that kernel and a cell's submit, again and again on one state dir, under the default
profile (bubblewrap: a kernel is bwrap, the sandbox's init in a session of its own, and the
kernel): every kernel process a killed gateway leaves is taken back or ended by the next one,
and after the last `gateway stop` none is left, whatever its parent."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

import httpx

from loomgate.gateway.residency.resident import RESIDENT_FILE
from tests.support.figures import Figure, scaled
from tests.support.gateways import (
    GatewayProcess,
    child_pids,
    client,
    describe_processes,
    kernel_processes_of,
    prewarmed,
    resident_kernels,
)
from tests.support.sandboxed_gateways import confined_gateway

SEED = int(os.environ.get("LOOMGATE_START_KILLS_SEED", "20261204"))
KILLS = scaled(20)
API = "/api/loomgate/kernels"
# Where the kill lands: just after the gateway answers (its pool kernel starting); before it
# answers, just after its pool kernel's launch marker names bwrap's pid and before it names the
# sandbox's init (some ms later); just after the claim of a ready pool kernel began (the claimed
# kernel's dir written, its resident.json not yet); during a new kernel's start and its first
# cell, before the pool has one.
MOMENTS = ("started", "launching", "claiming", "submitting")
OWNED_TIMEOUT = 15.0  # how long the last gateway's kills of leftovers may take to land
POLL = 0.001  # the windows aimed at are a few milliseconds wide


def unowned(gateway: GatewayProcess) -> set[int]:
    """Return the kernel processes of the gateway's state dir it does not account for: neither
    its descendants nor a kernel it keeps (a resident.json's bwrap and what runs under it)."""
    assert gateway.proc is not None
    owned = child_pids(gateway.proc.pid)
    for kernel in resident_kernels(gateway.state_dir, pool=False):
        if kernel.is_alive():
            owned |= {kernel.pid, *child_pids(kernel.pid)}
    return kernel_processes_of(gateway.state_dir) - owned


def launch_stage(state: Path, since: float = 0.0) -> str:
    """Return how far the launch markers of `state` (written after `since`, time.time()) say a
    kernel's launch went: "none" (no marker), "launching" (its process not started),
    "launched" (bwrap's pid noted, not the sandbox's init), or "init" (both)."""
    stage = "none"
    for marker in (state / "launching").glob("*.json"):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(marker.read_text())
            if data["since"] < since:
                continue
            if (data.get("sandbox") or {}).get("init"):
                stage = "init"
            elif data.get("identity"):
                stage = "launched"
            else:
                stage = "launching"
    return stage


async def launched(state: Path, since: float, starting: asyncio.Task[object]) -> None:
    """Return once a launch marker written after `since` names bwrap's pid (polled: nothing
    announces it), or that launch is over unseen, or the gateway's start is."""
    deadline = time.monotonic() + 60
    while launch_stage(state, since) not in ("launched", "init") and not starting.done():
        if pooled_since(state, since):
            return  # missed: its pool kernel's launch is over
        assert time.monotonic() < deadline, "the gateway launched no pool kernel"
        await asyncio.sleep(POLL)


def pooled_since(state: Path, since: float) -> bool:
    """Return whether a pool kernel's resident.json was written after `since` (time.time())."""
    for path in (state / "pool").glob(f"*/{RESIDENT_FILE}"):
        with contextlib.suppress(OSError):
            if path.stat().st_mtime >= since:
                return True
    return False


async def claim_begun(state: Path, before: set[Path], busy: asyncio.Task[None]) -> None:
    """Return once a kernel dir not in `before` exists (the claim's first write; its resident.json
    follows some milliseconds later), or the claim has ended. Polled: nothing announces it."""
    deadline = time.monotonic() + 30
    while not busy.done() and not set((state / "kernels").glob("*")) - before:
        assert time.monotonic() < deadline, "the claim never began"
        await asyncio.sleep(POLL)


async def create_and_run(http: httpx.AsyncClient, name: str, cwd: Path) -> None:
    """Create a conversation kernel (a claim, when the pool has one ready) and run a cell."""
    body = {"name": name, "lifetime": "conversation", "cwd": str(cwd)}
    r = await http.post(API, json=body)
    if r.status_code == 201:
        await http.post(f"{API}/{name}/executions", json={"code": "1 + 1", "wait": 5})


async def kill_at(gateway: GatewayProcess, moment: str, rng: random.Random, index: int) -> None:
    """Start the gateway and SIGKILL it at `moment`, a seeded few milliseconds in."""
    if moment == "launching":  # before it even answers
        since = time.time()
        starting = asyncio.create_task(asyncio.to_thread(gateway.start))
        await launched(gateway.state_dir, since, starting)
        await asyncio.sleep(rng.uniform(0, 0.003))
        assert gateway.proc is not None
        gateway.proc.kill()
        gateway.proc.wait()
        try:
            await starting  # it may have come up meanwhile
        except RuntimeError:  # "gateway exited with -9"
            assert gateway.proc.returncode == -signal.SIGKILL, gateway.proc.returncode
        return
    await asyncio.to_thread(gateway.start)
    project = gateway.state_dir.parent / "project"
    async with client(gateway) as http:
        busy: asyncio.Task[None] | None = None
        if moment == "claiming":
            await prewarmed(http)
            before = set((gateway.state_dir / "kernels").glob("*"))
            busy = asyncio.create_task(create_and_run(http, f"claimed-{index}", project))
            await claim_begun(gateway.state_dir, before, busy)
            await asyncio.sleep(rng.uniform(0, 0.01))
        elif moment == "submitting":
            busy = asyncio.create_task(create_and_run(http, f"started-{index}", project))
            await asyncio.sleep(rng.uniform(0, 0.3))
        else:
            await asyncio.sleep(rng.uniform(0, 0.03))
        gateway.kill_now()  # nothing noted first: no process of it may need the test to end it
        if busy is not None:
            with contextlib.suppress(httpx.HTTPError):
                await busy


async def test_kills_at_a_start_leave_no_kernel_without_an_owner(
    confined_root: Path, figure: Figure
) -> None:
    rng = random.Random(SEED)
    gateway = confined_gateway(confined_root)
    gateway.prewarm = 1
    state = gateway.state_dir
    moments: Counter[str] = Counter()
    left_by_kills = 0  # kernel processes running just after a kill, for the next gateway
    launches: Counter[str] = Counter()  # how far the launch a kill cut short had gone
    try:
        for index in range(KILLS):
            moment = rng.choice(MOMENTS)
            moments[moment] += 1
            await kill_at(gateway, moment, rng, index)
            left_by_kills += len(kernel_processes_of(state))
            launches[launch_stage(state)] += 1
        await asyncio.to_thread(gateway.start)
        async with client(gateway) as http:
            info = (await http.get("/api/loomgate/info")).json()
            assert info["sandbox_default"] == "workspace", info
            assert info["sandbox_mechanism"].startswith("bubblewrap"), info
        # Each kernel process the killed gateways left is the new gateway's, or ends.
        deadline = time.monotonic() + OWNED_TIMEOUT
        while strays := unowned(gateway):
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)  # SIGKILLed processes take a moment to go
        assert not strays, f"seed {SEED}: kernels without an owner: {describe_processes(strays)}"
        taken_back = len(list((state / "kernels").glob(f"*/{RESIDENT_FILE}")))
    finally:
        await asyncio.to_thread(gateway.stop)  # `gateway stop`; fails if any process is left
    left = kernel_processes_of(state)
    assert not left, f"seed {SEED}: left after `gateway stop`: {describe_processes(left)}"
    # The window that left the sandbox's init and its kernel running: bwrap's pid noted, the
    # init not yet.
    assert launches["launched"], f"seed {SEED}: no kill landed before a sandbox's init was noted"
    figure(
        scenario=f"fault: {KILLS} gateway SIGKILLs within ms of its start, of its prewarmed "
        f"kernel's launch, or of a claim and a cell's submit, under workspace (seed {SEED})",
        checked="after the next start every kernel process of the state dir (bwrap, sandbox "
        "init, kernel) is the gateway's or a kernel's it took back; after `gateway stop` none "
        "is left, parent 1 or not",
        kills=dict(moments),
        kernel_processes_left_by_kills=left_by_kills,
        launches_cut_short=dict(launches),
        kernels_taken_back_at_the_end=taken_back,
    )
