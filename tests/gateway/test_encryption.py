"""Kernels with CurveZMQ transport encryption (a user's Jupyter config can require it)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import zmq

from tests.support.gateways import GatewayProcess

API = "/api/loomgate/kernels"


async def test_an_encrypted_kernel_starts_runs_and_reads_input(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    assert zmq.has("curve"), "pyzmq without CurveZMQ: this machine cannot check encryption"
    config = tmp_path / "jupyter-config"
    config.mkdir()
    settings = {"KernelManager": {"transport_encryption": "required"}}
    (config / "jupyter_config.json").write_text(json.dumps(settings))
    fresh_gateway.env = {"JUPYTER_CONFIG_DIR": str(config)}
    fresh_gateway.start()
    async with httpx.AsyncClient(
        base_url=fresh_gateway.url, headers=fresh_gateway.headers, timeout=120
    ) as http:
        r = await http.post(API, json={"name": "sealed"})
        assert r.status_code == 201, r.text
        kernel = r.json()["kernel"]["id"]
        [connection] = (fresh_gateway.state_dir / "runtime").glob(f"kernel-{kernel}.json")
        assert "curve_publickey" in json.loads(connection.read_text())
        r = await http.post(
            f"{API}/sealed/executions", json={"code": "6 * 7", "wait": 30, "head": 5}
        )
        assert r.json()["execution"]["output"]["head"][0]["text"] == "42"
        code = "answer = input('word? ')\nprint(answer.upper())"
        r = await http.post(f"{API}/sealed/executions", json={"code": code, "wait": 30})
        assert r.json()["returned"] == "input"
        number = r.json()["execution"]["number"]
        r = await http.post(f"{API}/sealed/executions/{number}/input", json={"value": "curve"})
        assert r.status_code == 200
        r = await http.get(f"{API}/sealed/executions/{number}", params={"wait": 30, "head": 5})
        assert [x["text"] for x in r.json()["execution"]["output"]["head"]] == ["CURVE"]
