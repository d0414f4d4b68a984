"""Sandboxed kernels outlive their gateway and come from the pool: a kernel taken back after a
SIGKILL of the gateway keeps its variables and its sandbox, and a prewarmed kernel is confined
as the kernel it becomes."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gateway.test_prewarm import pooled
from tests.support.cells import KERNELS, output_texts, run
from tests.support.gateways import (
    GatewayProcess,
    client,
    resident_kernels,
    terminated_as_a_kernel_starts,
)


@pytest.fixture
def root() -> Iterator[Path]:
    """A directory outside the host's /tmp (which a sandbox replaces) for a gateway's state,
    config and project."""
    path = Path("/var/tmp") / f"loomgate-sandbox-{uuid.uuid4().hex[:8]}"
    (path / "project").mkdir(parents=True)
    (path / "config" / "loomgate").mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def gateway_in(root: Path, prewarm: int = 0) -> GatewayProcess:
    """Return a gateway with the shipped default profile, its state in `root`."""
    return GatewayProcess(
        root / "state", env={"XDG_CONFIG_HOME": str(root / "config")}, prewarm=prewarm
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
