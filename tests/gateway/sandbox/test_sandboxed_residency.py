"""Sandboxed kernels outlive their gateway and come from the pool: a kernel taken back after a
SIGKILL of the gateway keeps its variables and its sandbox, also by a gateway whose probe chose
another mechanism; a prewarmed kernel is confined as the kernel it becomes, and each profile has
a pool of its own."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from loomgate.gateway.residency.resident import RESIDENT_FILE
from tests.gateway.test_prewarm import POOL_TIMEOUT, pooled
from tests.support.cells import KERNELS, output_texts, run
from tests.support.gateways import (
    GatewayProcess,
    client,
    resident_kernels,
    terminated_as_a_kernel_starts,
)
from tests.support.sandboxed_gateways import sandbox_root


@pytest.fixture
def root() -> Iterator[Path]:
    """A directory outside the host's /tmp (which a sandbox replaces) for a gateway's state,
    config and project."""
    with sandbox_root() as path:
        yield path


def gateway_in(root: Path, prewarm: int = 0, cwd: Path | None = None) -> GatewayProcess:
    """Return a gateway with the shipped default profile, its state in `root`."""
    return GatewayProcess(
        root / "state", env={"XDG_CONFIG_HOME": str(root / "config")}, prewarm=prewarm, cwd=cwd
    )


def launched_pid(gateway: GatewayProcess, kernel_id: str) -> int:
    """Return the pid of the process the gateway launched for a kernel (bubblewrap's, for a
    confined one: the pool reports it as `launched_pid`), as its resident.json records it."""
    resident = gateway.state_dir / "kernels" / kernel_id / RESIDENT_FILE
    pid: int = json.loads(resident.read_text())["provisioner"]["identity"]["pid"]
    return pid


async def prewarmed_pids(http: httpx.AsyncClient, count: int) -> list[int]:
    """Return the launched pids of the ready pool kernels once there are `count` (no event says a
    pool kernel is ready: the gateway's report is polled)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + POOL_TIMEOUT
    while loop.time() < deadline:
        info = (await http.get("/api/loomgate/info")).json()
        pids = [int(k["launched_pid"]) for k in info["prewarmed"]]
        if len(pids) >= count:
            return pids
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} prewarmed kernels became ready")


def reach(port: int) -> str:
    """Return a cell that connects over TCP to a loopback port and says so."""
    return (
        "import socket\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
        "print('reached')"
    )


async def test_a_sandboxed_kernel_is_taken_back_after_a_gateway_sigkill(root: Path) -> None:
    gateway = gateway_in(root)
    try:
        gateway.start()
        async with client(gateway) as http:
            r = await http.post(
                KERNELS, json={"name": "kept", "sandbox": "strict", "cwd": str(root / "project")}
            )
            assert r.status_code == 201, r.text
            await run(http, "kept", "x = 41")
        before = resident_kernels(gateway.state_dir)
        assert len(before) == 2  # bubblewrap and the sandbox's init
        gateway.kill()
        assert all(identity.is_alive() for identity in before)
        gateway.start()
        async with client(gateway) as http:
            kernel = (await http.get(f"{KERNELS}/kept")).json()["kernel"]
            assert kernel["state"] == "idle"
            assert kernel["sandbox"]["profile"] == "strict"
            execution = await run(http, "kept", "print(x + 1)")
            assert output_texts(execution) == ["42"]
            escape = await run(http, "kept", f"open({str(gateway.state_dir / 'token')!r}).read()")
            assert escape["sandbox_failure"]["rule"] == "hidden"
            interrupt = await http.post(f"{KERNELS}/kept/interrupt")
            assert interrupt.status_code in (200, 409)  # nothing runs: refused or a no-op
            stopped = await http.delete(f"{KERNELS}/kept")
            assert stopped.status_code == 200, stopped.text
        assert not any(identity.is_alive() for identity in before)
    finally:
        gateway.stop()


@pytest.mark.parametrize(
    ("first", "then"), [("landlock", "auto"), ("auto", "landlock")], ids=["landlock", "bubblewrap"]
)
async def test_a_kernel_is_taken_back_by_a_gateway_that_chose_another_mechanism(
    root: Path, first: str, then: str
) -> None:
    gateway = gateway_in(root)
    gateway.env["LOOMGATE_SANDBOX_MECHANISM"] = first
    # Landlock alone refuses the default (its project's .git cannot stay read-only there).
    (root / "config" / "loomgate" / "sandbox.toml").write_text("[profiles.held]\nwritable = []\n")
    body = {"name": "kept", "cwd": str(root / "project")}
    body |= {"sandbox": "held"} if first == "landlock" else {}
    try:
        gateway.start()
        async with client(gateway) as http:
            r = await http.post(KERNELS, json=body)
            assert r.status_code == 201, r.text
            mechanism = r.json()["kernel"]["sandbox"]["mechanism"]
            assert mechanism.startswith("landlock only" if first == "landlock" else "bubblewrap")
            await run(http, "kept", "x = 41")
        before = resident_kernels(gateway.state_dir)
        assert len(before) == (1 if first == "landlock" else 2)  # the kernel; or bwrap and init
        gateway.kill()
        assert all(identity.is_alive() for identity in before)
        gateway.env["LOOMGATE_SANDBOX_MECHANISM"] = then
        gateway.start()
        async with client(gateway) as http:
            info = (await http.get("/api/loomgate/info")).json()
            assert info["sandbox_mechanism"] != mechanism  # this gateway chose the other one
            kernel = (await http.get(f"{KERNELS}/kept")).json()["kernel"]
            assert (kernel["state"], kernel["sandbox"]["mechanism"]) == ("idle", mechanism)
            assert output_texts(await run(http, "kept", "print(x + 1)")) == ["42"]
            interrupted = await http.post(f"{KERNELS}/kept/interrupt")
            assert interrupted.status_code in (200, 409)  # nothing runs: refused or a no-op
            stopped = await http.delete(f"{KERNELS}/kept")
            assert stopped.status_code == 200, stopped.text
        assert not any(identity.is_alive() for identity in before)  # signalled as it started
    finally:
        gateway.stop()


async def test_a_prewarmed_kernel_is_confined_as_the_kernel_it_becomes(root: Path) -> None:
    gateway = gateway_in(root, prewarm=1)
    try:
        gateway.start()
        async with client(gateway) as http:
            ready = await pooled(http)
            r = await http.post(KERNELS, json={})  # the default profile, the gateway's cwd
            assert r.status_code == 201, r.text
            kernel = r.json()["kernel"]
            assert kernel["sandbox"]["profile"] == "workspace"
            pid = await run(http, kernel["id"], "import os; print(os.getppid() > 0)")
            assert output_texts(pid) == ["True"]
            secret = await run(http, kernel["id"], f"open({str(gateway.state_dir / 'token')!r})")
            assert secret["sandbox_failure"]["rule"] == "hidden"
            info = (await http.get("/api/loomgate/info")).json()
            assert ready["pid"] not in [k["pid"] for k in info["prewarmed"]]  # it was claimed
            await http.delete(f"{KERNELS}/{kernel['id']}")
    finally:
        gateway.stop()


PROXY_SHOWN = "import os\nprint(os.environ.get('HTTP_PROXY'))"


async def test_each_profile_has_its_own_pool(root: Path) -> None:
    # The gateway prewarms its default profile (workspace). A strict kernel asked for must not
    # be that pool's kernel (its rules are fixed when its process starts): it starts under
    # strict, and a strict pool begins; a workspace kernel asked for is the workspace pool's.
    project = root / "project"
    gateway = gateway_in(root, prewarm=1, cwd=project)
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    made: list[str] = []
    try:
        gateway.start()
        async with client(gateway) as http:
            workspace_pool = (await pooled(http))["launched_pid"]
            r = await http.post(KERNELS, json={"sandbox": "strict"})  # in the pool's directory
            assert r.status_code == 201, r.text
            strict = r.json()["kernel"]
            made.append(strict["id"])
            assert strict["sandbox"]["profile"] == "strict"
            assert strict["sandbox"]["network"] is False
            assert launched_pid(gateway, strict["id"]) != workspace_pool
            offline = await run(http, strict["id"], reach(port))
            assert offline["sandbox_failure"]["rule"] == "network", output_texts(offline)
            # The workspace pool kept its kernel; a strict one joins it in a pool of its own.
            ready = await prewarmed_pids(http, 2)
            assert workspace_pool in ready
            [strict_pool] = [pid for pid in ready if pid != workspace_pool]
            r = await http.post(KERNELS, json={"sandbox": "strict"})
            assert r.status_code == 201, r.text
            made.append(r.json()["kernel"]["id"])
            assert launched_pid(gateway, made[-1]) == strict_pool
            again = await run(http, made[-1], reach(port))
            assert again["sandbox_failure"]["rule"] == "network", output_texts(again)
            r = await http.post(KERNELS, json={})  # the default profile
            assert r.status_code == 201, r.text
            workspace = r.json()["kernel"]
            made.append(workspace["id"])
            assert workspace["sandbox"]["profile"] == "workspace"
            assert launched_pid(gateway, workspace["id"]) == workspace_pool
            # Its network is the proxy's (HTTP_PROXY inside), strict's none at all.
            shown = await run(http, workspace["id"], PROXY_SHOWN)
            assert output_texts(shown) == ["http://127.0.0.1:3128"], shown
            assert output_texts(await run(http, made[-2], PROXY_SHOWN)) == ["None"]
            for kernel_id in made:
                await http.delete(f"{KERNELS}/{kernel_id}")
    finally:
        server.close()
        gateway.stop()


@pytest.mark.parametrize("stage", ["launched", "warming"])
def test_a_gateway_stopped_as_its_confined_pool_kernel_starts_leaves_no_process(
    root: Path, stage: str
) -> None:
    # SIGTERM while the pool's confined kernel starts: bubblewrap just launched, or the kernel
    # inside still importing (the pool waits for its kernel_info). Nothing of it may outlive
    # the gateway: not bubblewrap, not the sandbox's init, not the kernel.
    left = terminated_as_a_kernel_starts(
        gateway_in(root, prewarm=1), until_resident=stage == "warming"
    )
    assert left == set(), "a confined pool kernel outlived its gateway"
