"""The gateway's log holds only true lines: not jupyter_server's "Use Control-C to stop this
server and shut down all kernels" (Ctrl-C leaves the gateway's kernels running), and no warning
about the gateway's own settings (the rpc websocket's pings, which every translator opens).

jupyter_server's own websockets (a Jupyter client's kernel channels) still warn once, with
tornado >= 6.5, of jupyter_server's defaults: no setting both silences that and keeps its pings
from closing healthy connections.
"""

from __future__ import annotations

import json

import pytest
import websockets
from tornado import version_info

from loomgate.gateway.handlers import rpc
from tests.support.cells import submit
from tests.support.gateways import GatewayProcess, client

API = "/api/loomgate/kernels"


async def test_a_gateway_logs_only_true_lines(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.extra_args = ["--log-level", "INFO"]  # as a person's gateway runs
    fresh_gateway.start()
    url = fresh_gateway.url.replace("http://", "ws://") + "/api/loomgate/rpc"
    async with websockets.connect(url, additional_headers=fresh_gateway.headers) as ws:
        await ws.send(json.dumps({"id": 1, "method": "GET", "path": "info"}))
        assert json.loads(await ws.recv())["status"] == 200
    async with client(fresh_gateway) as http:
        kernel = (await http.post(API, json={})).json()["kernel"]["id"]
        await submit(http, kernel, "1 + 1")
        assert (await http.delete(f"{API}/{kernel}")).status_code == 200
    fresh_gateway.stop()

    log = (fresh_gateway.state_dir / "gateway.log").read_text()
    assert "leave the kernels running" in log  # loomgate's own line about Ctrl-C
    assert "Control-C" not in log
    assert "websocket_ping" not in log
    warnings = [line for line in log.splitlines() if " WARNING " in line or " ERROR " in line]
    assert warnings == []


@pytest.mark.parametrize("name", ["PING_INTERVAL", "PING_TIMEOUT"])
def test_rpc_pings_are_in_seconds_tornado_accepts(name: str) -> None:
    value = getattr(rpc, name)
    assert 1 <= value <= 300, "seconds, not milliseconds"
    if version_info >= (6, 5):  # tornado caps the timeout at the interval (and warns)
        assert rpc.PING_TIMEOUT <= rpc.PING_INTERVAL
