"""`loomgate-mcp --transport streamable-http` as a real process: a bearer token by default, the
SDK's own client with and without it, --token-env and --no-auth."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from loomgate.translator.mcp_server.settings import MCP_TOKEN_FILE
from loomgate.translator.presentation.http_access import unauthorized
from tests.support.gateways import GatewayProcess
from tests.support.mcp_clients import text
from tests.support.translators import (
    START_LINE,
    TRANSLATOR,
    bearer_client,
    http_translator,
    translator_env,
)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def one_cell(mcp: Any) -> str:
    """Run a cell through `mcp`, stop the kernel it made, and return the cell's text."""
    result: Any = await mcp.call_tool("run_cell", {"code": "'over http'"})
    await mcp.call_tool("stop_kernel", {"kernel": result.structured_content["kernel"]})
    return text(result)


async def test_a_host_with_the_kept_token_runs_cells(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    async with http_translator(gateway, tmp_path) as served:
        kept = tmp_path / MCP_TOKEN_FILE
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        token = kept.read_text().strip()
        assert len(token) >= 32
        async with bearer_client(served.url, token) as mcp:
            assert (await one_cell(mcp)).endswith("Out[1]: 'over http'")
        start = next(line for line in served.stderr if line.startswith(START_LINE))
        assert f"the token in {kept} (mode 0600)" in start
        registration = (
            f"claude mcp add --transport http loomgate {served.url} "
            f'--header "Authorization: Bearer $(cat {kept})"'
        )
        assert registration + "\n" in served.stderr
    assert not [line for line in served.stderr if token in line]  # never in its logs


@pytest.mark.parametrize(
    ("headers", "sentence"),
    [
        ({}, unauthorized(sent=False)),
        ({"Authorization": "Bearer not-the-token"}, unauthorized(sent=True)),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, unauthorized(sent=False)),
    ],
    ids=["no header", "wrong token", "not a bearer token"],
)
async def test_a_request_without_the_token_gets_401_and_one_sentence(
    gateway: GatewayProcess, tmp_path: Path, headers: dict[str, str], sentence: str
) -> None:
    async with (
        http_translator(gateway, tmp_path) as served,
        httpx.AsyncClient() as http,
    ):
        refused = await http.post(served.url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
        assert refused.status_code == 401
        assert refused.json()["error"]["message"] == sentence
        assert sentence.count(". ") == 0 and sentence.endswith(".")
        assert refused.headers["www-authenticate"].startswith("Bearer ")


async def test_the_sdk_client_without_the_token_reads_the_sentence(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    async with http_translator(gateway, tmp_path) as served:
        with pytest.raises(Exception) as refused:
            async with bearer_client(served.url, None) as mcp:
                await mcp.call_tool("list_kernels", {})
        assert unauthorized(sent=False) in repr(refused.value) + str(refused.value)


async def test_token_env_names_the_persons_token(gateway: GatewayProcess, tmp_path: Path) -> None:
    env = {"PERSONS_MCP_TOKEN": "a-token-of-the-persons-own-0123456789"}
    async with http_translator(
        gateway, tmp_path, "--token-env", "PERSONS_MCP_TOKEN", env=env
    ) as served:
        assert not (tmp_path / MCP_TOKEN_FILE).exists()
        start = next(line for line in served.stderr if line.startswith(START_LINE))
        assert "the token in $PERSONS_MCP_TOKEN." in start
        assert '--header "Authorization: Bearer $PERSONS_MCP_TOKEN"' in "".join(served.stderr)
        async with bearer_client(served.url, env["PERSONS_MCP_TOKEN"]) as mcp:
            assert (await one_cell(mcp)).endswith("Out[1]: 'over http'")
        async with httpx.AsyncClient() as http:
            wrong = {"Authorization": "Bearer a-token-of-the-persons-own-012345678"}
            refused = await http.post(served.url, json=INITIALIZE, headers={**MCP_HEADERS, **wrong})
            assert refused.status_code == 401
    assert not [line for line in served.stderr if env["PERSONS_MCP_TOKEN"] in line]


async def test_no_auth_on_loopback_is_the_persons_choice(
    gateway: GatewayProcess, tmp_path: Path
) -> None:
    async with http_translator(gateway, tmp_path, "--no-auth") as served:
        start = next(line for line in served.stderr if line.startswith(START_LINE))
        assert "without authentication (--no-auth)" in start
        async with bearer_client(served.url, None) as mcp:
            assert (await one_cell(mcp)).endswith("Out[1]: 'over http'")
    assert not (tmp_path / MCP_TOKEN_FILE).exists()


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["--no-auth", "--host", "0.0.0.0"],
            {},
            "loomgate-mcp: --no-auth is refused with --host 0.0.0.0: anyone who reaches that "
            "address could run code in your kernels; drop --no-auth (a bearer token is then "
            "required) or bind a loopback --host",
        ),
        (
            ["--token-env", "NO_SUCH_TOKEN_VARIABLE"],
            {},
            "loomgate-mcp: --token-env NO_SUCH_TOKEN_VARIABLE: $NO_SUCH_TOKEN_VARIABLE is empty "
            "or unset; set it to the token hosts will send, or leave --token-env out to use the "
            "one kept in {state}/mcp_token",
        ),
    ],
    ids=["no-auth on every address", "token-env unset"],
)
async def test_refused_before_listening(
    gateway: GatewayProcess,
    tmp_path: Path,
    args: list[str],
    env: dict[str, str],
    message: str,
) -> None:
    process = await asyncio.create_subprocess_exec(
        *TRANSLATOR,
        "--transport",
        "streamable-http",
        "--no-autostart",
        *args,
        env={**translator_env(gateway), "LOOMGATE_STATE_DIR": str(tmp_path), **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 2
    assert err.decode().strip() == message.format(state=tmp_path)
    assert not (tmp_path / MCP_TOKEN_FILE).exists()
