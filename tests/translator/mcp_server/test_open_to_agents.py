"""The model's ceiling holds for every kernel it touches: through the real in-memory MCP client of
a translator of a real sandboxed gateway, a kernel looser than the default that the person
started (`loomgate run --sandbox none`, a notebook's through /api/kernels) is refused to the
model until the person opens it; the model cannot open one; and a URL the model names is never
sent a token."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from loomgate.shared import wire
from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.cells import KERNELS
from tests.support.gateways import client
from tests.support.mcp_clients import text
from tests.support.sandboxed_gateways import SandboxedGateway

AGENT = {wire.AGENT_HEADER: "1"}


def closed(label: str, profile: str = "none", default: str = "workspace") -> str:
    """Return the model's refusal of a call on kernel `label`, closed to agents."""
    runs = (
        f"runs under the sandbox profile {profile}, looser than this gateway's default ({default})"
        if profile
        else "is not sandboxed by loomgate"
    )
    return (
        f"Kernel {label} {runs}, so a model may not use it; only the person opens it to agents "
        f'(`loomgate agents open {label}`). connect(kernel="a-new-name") starts a kernel of '
        "your own."
    )


@pytest.fixture(autouse=True)
def no_jupyter_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty Jupyter runtime dir: connect looks for the kernel on no one's servers."""
    runtime = tmp_path / "jupyter-runtime"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))


@asynccontextmanager
async def translator_of(
    place: SandboxedGateway, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Client, httpx.AsyncClient]]:
    """Yield an MCP client of a translator of the sandboxed gateway and the person's HTTP
    client of it."""
    gateway = place.gateway
    settings = Settings(
        gateway=gateway.url,
        autostart=False,
        cwd=str(place.project),
        env=env or {"LOOMGATE_TOKEN": gateway.token},
    )
    async with Client(build_server(settings), mode="legacy") as mcp, client(gateway) as http:
        yield mcp, http


async def started(http: httpx.AsyncClient, place: SandboxedGateway, **body: Any) -> dict[str, Any]:
    """Return the kernel the person starts with `body` (a persistent, named one)."""
    r = await http.post(KERNELS, json={"cwd": str(place.project), **body})
    assert r.status_code == 201, r.text
    kernel: dict[str, Any] = r.json()["kernel"]
    return kernel


async def executions(http: httpx.AsyncClient, ref: str) -> int:
    """Return how many cells the kernel `ref` has run."""
    r = await http.get(f"{KERNELS}/{ref}")
    assert r.status_code == 200, r.text
    count: int = r.json()["kernel"]["executions"]
    return count


async def test_a_looser_kernel_of_the_persons_is_refused_to_every_tool_of_the_model(
    sandboxed: SandboxedGateway,
) -> None:
    async with translator_of(sandboxed) as (mcp, http):
        kernel = await started(http, sandboxed, name="pnone", sandbox="none")
        secret = "open('/etc/hostname').read()"
        calls = [
            ("run_cell", {"kernel": "pnone", "code": secret}),
            ("connect", {"kernel": "pnone"}),
            ("read_output", {"kernel": "pnone", "execution": 1}),
            ("search_output", {"kernel": "pnone", "query": "x"}),
            ("interrupt", {"kernel": "pnone"}),
            ("reset", {"kernel": "pnone"}),
            ("checkpoint", {"kernel": "pnone"}),
            ("rollback", {"kernel": "pnone", "to": "after-1"}),
        ]
        replies = {name: await mcp.call_tool(name, args) for name, args in calls}
        listing = await mcp.call_tool("list_kernels", {})
        ran = await executions(http, "pnone")
        still = (await http.get(f"{KERNELS}/pnone")).json()["kernel"]
    assert kernel["open_to_agents"] is False
    for name, reply in replies.items():
        assert reply.is_error, (name, text(reply))
        # connect's failure goes on after the sentence (what is connected now).
        assert text(reply).startswith(closed("pnone").rstrip(".")), (name, text(reply))
    assert ran == 0  # nothing the model sent reached it
    assert still["alive"] and still["state"] == "idle"
    assert (
        "not open to agents: pnone (only the person opens one: `loomgate agents open KERNEL`)"
        in (text(listing))
    )


async def test_the_person_opens_a_kernel_to_agents_and_closes_it_again(
    sandboxed: SandboxedGateway,
) -> None:
    async with translator_of(sandboxed) as (mcp, http):
        await started(http, sandboxed, name="pnone", sandbox="none")
        opened = await http.put(f"{KERNELS}/pnone/agents", json={"open": True})
        ran = await mcp.call_tool("run_cell", {"kernel": "pnone", "code": "20 + 22"})
        closed_again = await http.put(f"{KERNELS}/pnone/agents", json={"open": False})
        refused = await mcp.call_tool("run_cell", {"kernel": "pnone", "code": "1"})
    assert opened.status_code == 200 and opened.json()["kernel"]["open_to_agents"] is True
    assert not ran.is_error, text(ran)
    assert text(ran).endswith("42")
    assert closed_again.json()["kernel"]["open_to_agents"] is False
    assert refused.is_error and text(refused).startswith(closed("pnone"))


async def test_a_kernel_at_least_as_strict_as_the_default_is_open(
    sandboxed: SandboxedGateway,
) -> None:
    async with translator_of(sandboxed) as (mcp, http):
        kernel = await started(http, sandboxed, name="tight", sandbox="strict")
        ran = await mcp.call_tool("run_cell", {"kernel": "tight", "code": "6 * 7"})
    assert kernel["open_to_agents"] is True
    assert not ran.is_error and text(ran).endswith("42"), text(ran)


async def test_notebook_kernels_are_closed_unless_sandbox_toml_opens_them(
    sandboxed: SandboxedGateway,
) -> None:
    async with translator_of(sandboxed) as (mcp, http):
        notebook = await http.post("/api/kernels", json={"name": "python3"})
        assert notebook.status_code == 201, notebook.text
        first = notebook.json()["id"]
        refused = await mcp.call_tool("run_cell", {"kernel": first, "code": "1"})
        sandboxed.config_file.write_text("jupyter_api_open_to_agents = true\n")
        try:
            later = await http.post("/api/kernels", json={"name": "python3"})
            assert later.status_code == 201, later.text
            ran = await mcp.call_tool("run_cell", {"kernel": later.json()["id"], "code": "2 ** 5"})
        finally:
            sandboxed.config_file.write_text('default = "workspace"\n')
    assert refused.is_error
    assert text(refused).startswith(closed(first[:8])), text(refused)
    assert not ran.is_error and text(ran).endswith("32"), text(ran)


async def test_a_models_call_cannot_open_a_kernel_nor_start_a_looser_one(
    sandboxed: SandboxedGateway,
) -> None:
    async with translator_of(sandboxed) as (_, http):
        await started(http, sandboxed, name="pnone", sandbox="none")
        opening = await http.put(f"{KERNELS}/pnone/agents", json={"open": True}, headers=AGENT)
        creating = await http.post(
            KERNELS,
            json={"name": "mine", "cwd": str(sandboxed.project), "open_to_agents": True},
            headers=AGENT,
        )
        # A model's call is stricter_only whatever its body says.
        looser = await http.post(
            KERNELS,
            json={"name": "mine", "cwd": str(sandboxed.project), "sandbox": "none"},
            headers=AGENT,
        )
        taken = await http.post(KERNELS, json={"name": "pnone"}, headers=AGENT)
        listed = (await http.get(KERNELS)).json()["kernels"]
    assert (opening.status_code, opening.json()["error"]) == (403, "forbidden")
    assert opening.json()["message"].startswith("only the person opens a kernel to agents")
    assert (creating.status_code, looser.status_code) == (403, 403)
    assert looser.json()["message"].startswith("the sandbox profile none is looser")
    assert taken.status_code == 403 and taken.json()["open_to_agents"] is False
    assert [k["name"] for k in listed if k["alive"]] == ["pnone"]  # "mine" never started
    assert next(k for k in listed if k["name"] == "pnone")["open_to_agents"] is False


async def test_a_url_the_model_names_is_sent_no_token(sandboxed: SandboxedGateway) -> None:
    heard: list[bytes] = []

    async def listener(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heard.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(listener, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    token = sandboxed.gateway.token
    # The documented set-up for a gateway elsewhere: LOOMGATE_URL with LOOMGATE_TOKEN.
    env = {"LOOMGATE_URL": sandboxed.gateway.url, "LOOMGATE_TOKEN": token}
    try:
        async with translator_of(sandboxed, env) as (mcp, _):
            reply = await mcp.call_tool("list_kernels", {"gateway": f"http://127.0.0.1:{port}"})
            own = await mcp.call_tool("list_kernels", {})
    finally:
        server.close()
        await server.wait_closed()
    assert reply.is_error
    assert "a URL a model names is sent no token: name that gateway in gateways.toml" in text(reply)
    assert not any(token.encode() in request for request in heard)
    assert not any(b"authorization" in request.lower() for request in heard)
    assert not own.is_error, text(own)  # its own gateway still gets the token
