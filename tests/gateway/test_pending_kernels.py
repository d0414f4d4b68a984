"""loomgate's own kernel starts under `use_pending_kernels` (a setting a person's Jupyter config
may carry, where `start_kernel` returns while the process still starts): a kernel asked for by
name is that kernel once the answer comes, and a prewarmed one is claimed whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gateway.test_prewarm import pooled
from tests.support.cells import output_texts, run
from tests.support.gateways import GatewayProcess, client

API = "/api/loomgate/kernels"


def pending_gateway(tmp_path: Path, prewarm: int) -> GatewayProcess:
    """Return (not started) a gateway whose Jupyter config sets `use_pending_kernels`."""
    config = tmp_path / "jupyter-config"
    config.mkdir()
    config.joinpath("jupyter_config.json").write_text(
        json.dumps({"AsyncMappingKernelManager": {"use_pending_kernels": True}})
    )
    state = tmp_path / "state"
    state.mkdir()
    gateway = GatewayProcess(state, env={"JUPYTER_CONFIG_DIR": str(config)})
    gateway.prewarm = prewarm
    return gateway


@pytest.mark.parametrize("prewarm", [0, 1], ids=["started", "claimed"])
async def test_a_kernel_asked_for_by_name_is_created_under_pending_kernels(
    tmp_path: Path, prewarm: int
) -> None:
    gateway = pending_gateway(tmp_path, prewarm)
    try:
        gateway.start()
        async with client(gateway) as http:
            pool = await pooled(http) if prewarm else None
            r = await http.post(API, json={"name": "pend", "sandbox": "none"})
            assert r.status_code == 201, r.text
            kernel = r.json()["kernel"]
            assert kernel["name"] == "pend"
            if pool is not None:  # the kernel is the one the pool held
                pid = await run(http, "pend", "import os; os.getpid()")
                assert output_texts(pid) == [str(pool["pid"])]
            listed = (await http.get(API)).json()["kernels"]
            assert [k["name"] for k in listed if k["id"] == kernel["id"]] == ["pend"], listed
            execution = await run(http, "pend", "print(6 * 7)")
            assert execution["state"] == "completed", execution
            assert output_texts(execution) == ["42"]
            r = await http.post(API, json={"name": "pend", "sandbox": "none"})
            assert r.status_code == 200 and r.json()["kernel"]["id"] == kernel["id"], r.text
    finally:
        gateway.stop()
