"""A kernel's last activity is its own, not the moment a gateway took it back: across a
`kill -9` of the gateway and a restart, in loomgate's model and in Jupyter's."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from tests.support.cells import submit
from tests.support.gateways import GatewayProcess, client

API = "/api/loomgate/kernels"
IDLE = 1.5  # seconds the kernel stays idle before the gateway is killed


async def test_last_activity_survives_a_gateway_sigkill(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "quiet"})
        assert r.status_code == 201, r.text
        kernel_id = r.json()["kernel"]["id"]
        await submit(http, "quiet", "x = 1")
        before = (await http.get(f"{API}/quiet")).json()["kernel"]["last_activity"]
        jupyter_before = (await http.get(f"/api/kernels/{kernel_id}")).json()["last_activity"]
    await asyncio.sleep(before + IDLE - time.time())  # the clock must move on for a reset to show
    fresh_gateway.kill()

    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        model = (await http.get(f"{API}/quiet")).json()["kernel"]
        assert model["alive"], model
        assert abs(model["last_activity"] - before) < 0.1, (model["last_activity"], before)
        listed = {k["id"]: k for k in (await http.get(API)).json()["kernels"]}
        assert abs(listed[kernel_id]["last_activity"] - before) < 0.1
        jupyter = (await http.get(f"/api/kernels/{kernel_id}")).json()["last_activity"]
        seconds = datetime.fromisoformat(jupyter.replace("Z", "+00:00")).timestamp()
        jupyter_seconds = datetime.fromisoformat(jupyter_before.replace("Z", "+00:00")).timestamp()
        assert abs(seconds - jupyter_seconds) < 0.1, (jupyter, jupyter_before)

        # A cell is activity again, and moves it on.
        await submit(http, "quiet", "x + 1")
        after = (await http.get(f"{API}/quiet")).json()["kernel"]["last_activity"]
        assert after > before + IDLE
