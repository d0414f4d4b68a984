"""Auth on every endpoint, private state files, loopback by default, no token in logs."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import httpx
import pytest
import websockets

from tests.gateways import GatewayProcess

API = "/api/loomgate/kernels"

ENDPOINTS = [
    ("GET", "/api/kernels"),
    ("POST", "/api/kernels"),
    ("GET", "/api/kernelspecs"),
    ("GET", "/api/sessions"),
    ("GET", "/api/loomgate/info"),
    ("GET", "/api/loomgate/kernels"),
    ("POST", "/api/loomgate/kernels"),
    ("GET", "/api/loomgate/kernels/{k}"),
    ("DELETE", "/api/loomgate/kernels/{k}"),
    ("POST", "/api/loomgate/kernels/{k}/executions"),
    ("GET", "/api/loomgate/kernels/{k}/executions"),
    ("GET", "/api/loomgate/kernels/{k}/executions/1"),
    ("GET", "/api/loomgate/kernels/{k}/executions/1/streams/combined"),
    ("POST", "/api/loomgate/kernels/{k}/executions/1/input"),
    ("GET", "/api/loomgate/kernels/{k}/search?query=x"),
    ("POST", "/api/loomgate/kernels/{k}/interrupt"),
    ("POST", "/api/loomgate/kernels/{k}/reset"),
    ("GET", "/api/loomgate/events"),
]


@pytest.mark.parametrize("token", [None, "wrong-token"], ids=["missing", "wrong"])
async def test_every_endpoint_refuses_without_the_token(
    gateway: GatewayProcess, http: httpx.AsyncClient, kernel: str, token: str | None
) -> None:
    await http.post(f"{API}/{kernel}/executions", json={"code": "1", "wait": 30})
    headers = {"Authorization": f"token {token}"} if token else {}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=30) as anon:
        for method, path in ENDPOINTS:
            r = await anon.request(
                method, path.format(k=kernel), json={"code": "open('/tmp/pwned', 'w')"}
            )
            assert r.status_code == 403, (method, path, r.status_code)
    with pytest.raises(websockets.InvalidStatus) as refused:
        await websockets.connect(
            gateway.url.replace("http", "ws") + f"/api/kernels/{kernel}/channels",
            additional_headers=headers,
        )
    assert refused.value.response.status_code == 403
    r = await http.get(f"{API}/{kernel}/executions")
    assert [e["code"] for e in r.json()["executions"]] == ["1"]
    r = await http.get(f"{API}/{kernel}")
    assert r.json()["kernel"]["state"] == "idle"


def test_state_files_are_private(gateway: GatewayProcess) -> None:
    assert stat.S_IMODE(gateway.state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((gateway.state_dir / "gateway.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((gateway.state_dir / "gateway.log").stat().st_mode) == 0o600


async def test_token_never_in_logs(gateway: GatewayProcess, http: httpx.AsyncClient) -> None:
    await http.get("/api/loomgate/info")
    logs = [gateway.state_dir / "gateway.log", gateway.state_dir.parent / "state.stderr"]
    for path in logs:
        assert gateway.token not in path.read_text(errors="replace"), path


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1"])
def test_non_loopback_bind_needs_explicit_token(tmp_path: os.PathLike, host: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "loomgate.gateway.app", "--host", host, "--port", "1"],
        env={**os.environ, "LOOMGATE_STATE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "needs an explicit token" in result.stderr


async def test_kernel_cwd_and_requested_env(http: httpx.AsyncClient, tmp_path: os.PathLike) -> None:
    r = await http.post(API, json={"cwd": str(tmp_path), "env": {"LOOMGATE_REQUESTED": "yes"}})
    assert r.status_code == 201, r.text
    kernel = r.json()["kernel"]["id"]
    try:
        code = "import os; os.getcwd(), os.environ.get('LOOMGATE_REQUESTED')"
        r = await http.post(
            f"{API}/{kernel}/executions", json={"code": code, "wait": 30, "head": 1}
        )
        assert r.json()["execution"]["output"]["head"][0]["text"] == repr((str(tmp_path), "yes"))
    finally:
        await http.delete(f"{API}/{kernel}")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"cwd": "/no/such/dir"}, "not an existing absolute directory"),
        ({"cwd": "relative/dir"}, "not an existing absolute directory"),
        ({"env": {"BAD NAME": "x"}}, "invalid environment variables"),
        ({"name": "has space"}, "kernel name"),
        ({"kernel_spec": "nope"}, "no kernel spec named 'nope'"),
        ({"lifetime": "forever"}, "lifetime must be"),
    ],
)
async def test_bad_kernel_requests_are_refused(
    http: httpx.AsyncClient, body: dict, fragment: str
) -> None:
    before = len((await http.get(API)).json()["kernels"])
    r = await http.post(API, json=body)
    assert r.status_code == 400
    assert fragment in r.json()["message"]
    assert len((await http.get(API)).json()["kernels"]) == before
