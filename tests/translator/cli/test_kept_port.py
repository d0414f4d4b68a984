"""The local gateway's port is kept with the state dir: after `gateway start --port N` and a
clean stop, autostart, `gateway start` and `install-service --print` use N until it changes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from loomgate.shared.paths import GatewayFile, write_gateway_file, write_port_file
from loomgate.translator.client.local_gateway import daemon_address
from loomgate.translator.client.target import LOCAL_URL, GatewayTarget
from tests.support.gateways import free_port, stop_local_gateway
from tests.translator.cli.test_commands import loomgate

LOCAL = GatewayTarget(LOCAL_URL, None, True, None, True)


@pytest.mark.parametrize(
    ("kept", "died", "target", "port"),
    [
        (None, None, LOCAL, 8787),
        (8790, None, LOCAL, 8790),  # kept after a clean stop
        (None, 8791, LOCAL, 8791),  # a gateway that died left its gateway.json
        (8790, 8791, LOCAL, 8790),  # the kept port is the chosen one
        (8790, None, GatewayTarget("http://127.0.0.1:9000", None, True, None, True), 9000),
    ],
)
def test_where_a_started_gateway_listens(
    tmp_path: Path, kept: int | None, died: int | None, target: GatewayTarget, port: int
) -> None:
    if kept is not None:
        write_port_file(tmp_path, kept)
    if died is not None:
        info = GatewayFile(url=f"http://127.0.0.1:{died}", token="t", pid=1, version="0")
        write_gateway_file(tmp_path, info)
    assert daemon_address(tmp_path, target) == ("127.0.0.1", port)


def port_of(state: Path) -> int | None:
    """Return the port the running gateway's gateway.json names."""
    return urlsplit(json.loads((state / "gateway.json").read_text())["url"]).port


async def test_the_port_outlives_a_clean_stop(tmp_path: Path) -> None:
    port = free_port()
    state = tmp_path / "state"
    env = {
        **os.environ,
        "LOOMGATE_STATE_DIR": str(state),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    try:
        status, _, err = await loomgate(env, "gateway", "start", "--port", str(port))
        assert status == 0, err
        status, _, err = await loomgate(env, "gateway", "stop", "--keep-kernels")
        assert status == 0, err
        assert not (state / "gateway.json").exists()
        # The next call autostarts the gateway, on the kept port.
        status, out, err = await loomgate(env, "run", "40 + 2")
        assert status == 0 and "Out[1]: 42" in out.splitlines(), err
        assert port_of(state) == port
        status, _, err = await loomgate(env, "gateway", "stop")
        assert status == 0, err
        status, printed, _ = await loomgate(env, "gateway", "install-service", "--print")
        [exec_start] = [line for line in printed.splitlines() if line.startswith("ExecStart=")]
        assert exec_start.endswith(f"--port {port} --state-dir {state}")
        status, out, err = await loomgate(env, "gateway", "start")
        assert status == 0, err
        assert port_of(state) == port
        assert out == f"gateway running at http://127.0.0.1:{port}\n"
    finally:
        await loomgate(env, "gateway", "stop")
        stop_local_gateway(state)
