"""`loomgate monitor` of a gateway given by URL, by a gateways.toml name or by LOOMGATE_URL: the
gateway gives its monitor token to the full token (never to the monitor token itself)."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.support.gateways import GatewayProcess
from tests.translator.cli.test_commands import loomgate


async def test_the_monitor_token_is_given_to_the_full_token_only(gateway: GatewayProcess) -> None:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
        full = await http.get("/api/loomgate/monitor", headers=gateway.headers)
        assert (full.status_code, full.json()) == (200, {"monitor_token": gateway.monitor_token})
        monitor = {"Authorization": f"token {gateway.monitor_token}"}
        assert (await http.get("/api/loomgate/monitor", headers=monitor)).status_code == 403
        assert (await http.get("/api/loomgate/monitor")).status_code == 403


async def test_monitor_of_a_gateway_given_by_url_name_or_variable(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    page = f"{gateway.url}/loomgate/monitor?token={gateway.monitor_token}"
    config = tmp_path / "cli-config"
    (config / "loomgate").mkdir(parents=True)
    (config / "loomgate" / "gateways.toml").write_text(
        f'[gateways.box]\nurl = "{gateway.url}"\ntoken_env = "BOX_TOKEN"\n'
    )
    base = {
        **os.environ,
        "XDG_CONFIG_HOME": str(config),
        "LOOMGATE_STATE_DIR": str(tmp_path / "no-local-gateway"),
    }
    by_variable = {**base, "LOOMGATE_URL": gateway.url, "LOOMGATE_TOKEN": gateway.token}
    by_name = {**base, "BOX_TOKEN": gateway.token}
    by_token = {**base, "LOOMGATE_TOKEN": gateway.token}
    for env, args in [
        (by_variable, ["monitor", "--no-browser"]),
        (by_name, ["--gateway", "box", "monitor", "--no-browser"]),
        (by_token, ["--gateway", gateway.url, "monitor", "--no-browser"]),
    ]:
        status, out, err = await loomgate(env, "--no-autostart", *args)
        assert (status, out) == (0, page + "\n"), err
    async with httpx.AsyncClient() as browser:
        assert (await browser.get(page)).status_code == 200
    assert not (tmp_path / "no-local-gateway").exists()  # no local gateway was started
