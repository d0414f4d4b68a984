"""Auth on every endpoint, private state files, loopback by default, tokens and secrets kept."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from mcp import Client
from mcp.client.stdio import stdio_client

from loomgate.shared.paths import GATEWAY_FILE, LOG_FILE
from tests.support.figures import Figure
from tests.support.gateways import GatewayProcess, gateway_with_token
from tests.support.mcp_clients import stop_conversation_kernel, text
from tests.support.translators import stdio

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
    ("GET", "/api/loomgate/kernels/{k}/executions/1/rich/0"),
    ("POST", "/api/loomgate/kernels/{k}/executions/1/input"),
    ("GET", "/api/loomgate/kernels/{k}/search?query=x"),
    ("POST", "/api/loomgate/kernels/{k}/interrupt"),
    ("POST", "/api/loomgate/kernels/{k}/reset"),
    ("GET", "/api/loomgate/events"),
    ("POST", "/api/loomgate/shutdown"),
]


@pytest.mark.parametrize("token", [None, "wrong-token"], ids=["missing", "wrong"])
async def test_every_endpoint_refuses_without_the_token(
    gateway: GatewayProcess,
    http: httpx.AsyncClient,
    kernel: str,
    token: str | None,
    figure: Figure,
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
    figure(
        scenario=f"security: {'missing' if token is None else 'wrong'} token",
        checked="every REST, loomgate and event endpoint answers 403, the kernel websocket is "
        "refused, and nothing ran",
        endpoints=len(ENDPOINTS) + 1,
    )


def test_state_files_are_private(gateway: GatewayProcess, figure: Figure) -> None:
    assert stat.S_IMODE(gateway.state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((gateway.state_dir / GATEWAY_FILE).stat().st_mode) == 0o600
    assert stat.S_IMODE((gateway.state_dir / LOG_FILE).stat().st_mode) == 0o600
    kernels = gateway.state_dir / "kernels"
    assert all(stat.S_IMODE(d.stat().st_mode) == 0o700 for d in [kernels, *kernels.iterdir()])
    figure(
        scenario="security: state dir permissions",
        checked="state dir and kernel record dirs 0700; gateway.json and gateway.log 0600",
        paths=3 + len(list(kernels.iterdir())),
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.1"])
def test_non_loopback_bind_needs_explicit_token(
    tmp_path: os.PathLike, host: str, figure: Figure
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "loomgate.gateway", "--host", host, "--port", "1"],
        env={**os.environ, "LOOMGATE_STATE_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "needs an explicit token" in result.stderr
    figure(
        scenario=f"security: bind to {host} without a token",
        checked="the gateway refuses to start (exit 2) and says it needs an explicit token",
    )


async def kernel_environment(mcp: Client) -> str:
    """Return the text of a cell that prints every environment variable of its kernel."""
    code = "import os\nfor k, v in sorted(os.environ.items()): print(k, '=', v)"
    return text(await mcp.call_tool("run_cell", {"code": code, "full_output": True}))


async def test_kernels_see_no_token_and_no_translator_secret(
    tmp_path: Path, figure: Figure
) -> None:
    token = secrets.token_urlsafe(24)
    gateway = gateway_with_token(tmp_path / "state", token)
    secret = {"OPENAI_API_KEY": "sk-" + secrets.token_hex(16)}
    try:
        gateway.start()
        async with Client(stdio(gateway, env=secret)) as mcp:
            environment = await kernel_environment(mcp)
            assert "PATH =" in environment, environment[:500]
            assert token not in environment, "the gateway's token reached a kernel"
            assert secret["OPENAI_API_KEY"] not in environment
    finally:
        gateway.stop()
    figure(
        scenario="security: kernel environment",
        checked="a kernel sees neither the gateway token (given by --token-env) nor a secret "
        "in the translator's environment",
        variables_checked=environment.count(" = "),
    )


async def test_tokens_absent_from_replies_and_logs(
    gateway: GatewayProcess, tmp_path: Path, figure: Figure
) -> None:
    wrong = "wrong-" + secrets.token_urlsafe(16)
    replies: list[str] = []
    calls: list[tuple[str, dict[str, Any]]] = [
        ("run_cell", {"code": "print('hello')"}),
        ("run_cell", {"code": "1/0"}),
        ("read_output", {"lines": "9:x"}),
        ("search_output", {"query": "(", "mode": "regex"}),
        ("status", {}),
        ("connect", {"kernel": "k", "gateway": "http://127.0.0.1:9"}),
        ("list_kernels", {"gateway": "nowhere"}),
        ("stop_kernel", {"kernel": "no-such-kernel"}),
    ]
    logs = []
    for name, token in (("right", gateway.token), ("wrong", wrong)):
        log = tmp_path / f"{name}.stderr"
        logs.append(log)
        params = stdio(gateway, env={"LOOMGATE_TOKEN": token})
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as mcp:
                for call in calls:
                    replies.append(text(await mcp.call_tool(*call)))
                await stop_conversation_kernel(mcp)
    assert any("token" in reply and "refused" in reply for reply in replies[len(calls) :])
    # Make the gateway log its own token: a request whose path holds it is logged (404).
    async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers) as http:
        probe = await http.get(f"/api/loomgate/kernels/{gateway.token}/executions")
        assert probe.status_code == 404
        # The server logs a request just after sending its reply; the next reply comes after
        # that line is written.
        assert (await http.get("/api/status")).status_code == 200
    scanned = [*replies]
    logs += [gateway.state_dir / LOG_FILE, gateway.state_dir.parent / "state.stderr"]
    scanned += [path.read_text(errors="replace") for path in logs]
    for log in scanned[-2:]:  # both gateway logs wrote the line, with the token redacted
        assert "404 GET /api/loomgate/kernels/<token>/executions" in log
    for token in (gateway.token, wrong):
        assert all(token not in chunk for chunk in scanned)
    figure(
        scenario="security: tokens in replies and logs",
        checked="neither the right nor a wrong token appears in any tool result, error, "
        "translator log or gateway log",
        replies=len(replies),
        logs=len(logs),
        bytes_scanned=sum(len(chunk) for chunk in scanned),
    )


async def test_login_cookie_only_for_a_query_token(gateway: GatewayProcess, figure: Figure) -> None:
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as anon:
        by_header = await anon.get("/api/loomgate/info", headers=gateway.headers)
        assert by_header.status_code == 200 and "set-cookie" not in by_header.headers
        by_query = await anon.get("/api/kernels", params={"token": gateway.token})
        assert by_query.status_code == 200 and "set-cookie" in by_query.headers
        assert gateway.token not in by_query.headers["set-cookie"]
        with_cookie = await anon.get("/api/kernels")  # the cookie alone now authenticates
        assert with_cookie.status_code == 200
    figure(
        scenario="security: login cookies",
        checked="a header-token request gets no cookie; a ?token= login gets a signed cookie "
        "without the token in it, as in Jupyter",
    )
