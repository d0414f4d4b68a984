"""connect's sandbox argument and the replies that carry a kernel's sandbox, through the real
in-memory MCP client of a translator of a real gateway whose kernels are sandboxed; a gateway
from before sandboxes (which ignores the profile) answers from a script."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.cells import KERNELS
from tests.support.gateways import client
from tests.support.mcp_clients import ERAS, conversation, text
from tests.support.sandboxed_gateways import SandboxedGateway
from tests.support.scripted_gateway import TOKEN, Answer, scripted_gateway, started_unconfined
from tests.support.wire_values import kernel

# What a failed connect adds when the conversation has no kernel yet.
NOTHING_CONNECTED = (
    "no kernel is connected: the next run_cell starts one of the gateway's default kernel spec"
)


@pytest.fixture(autouse=True)
def no_jupyter_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty Jupyter runtime dir: connect looks for the kernel on no one's servers."""
    runtime = tmp_path / "jupyter-runtime"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))


def client_of(url: str, era: str, cwd: Path, token: str = TOKEN) -> Client:
    """Return an in-memory MCP client of a translator bound to the gateway at `url`."""
    settings = Settings(gateway=url, autostart=False, cwd=str(cwd), env={"LOOMGATE_TOKEN": token})
    return Client(build_server(settings), mode=era)


@asynccontextmanager
async def translator_of(place: SandboxedGateway) -> AsyncIterator[tuple[Client, httpx.AsyncClient]]:
    """Yield an MCP client of a translator of the sandboxed gateway, working in its project, and
    an HTTP client of that gateway."""
    gateway = place.gateway
    async with (
        client_of(gateway.url, "legacy", place.project, gateway.token) as mcp,
        client(gateway) as http,
    ):
        yield mcp, http


async def live_kernels(http: httpx.AsyncClient) -> list[str]:
    """Return the ids of the gateway's live kernels (stopped ones stay listed)."""
    r = await http.get(KERNELS)
    assert r.status_code == 200, r.text
    return [k["id"] for k in r.json()["kernels"] if k["alive"]]


async def kernel_named(http: httpx.AsyncClient, ref: str) -> dict[str, Any]:
    """Return the gateway's kernel `ref` (a name or an id)."""
    r = await http.get(f"{KERNELS}/{ref}")
    assert r.status_code == 200, r.text
    found: dict[str, Any] = r.json()["kernel"]
    return found


@pytest.mark.parametrize("era", ERAS)
async def test_connect_offers_a_sandbox_argument(era: str, tmp_path: Path) -> None:
    async with client_of("http://127.0.0.1:9", era, tmp_path) as mcp:
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
    argument = tools["connect"].input_schema["properties"]["sandbox"]
    assert "kernel" in tools["connect"].input_schema["required"]
    assert "sandbox" not in tools["connect"].input_schema.get("required", [])
    description = argument["description"]
    assert "at least as strict as the default" in description
    for profile in ("none", "workspace", "strict"):
        assert profile in description


async def test_connect_starts_a_kernel_under_a_stricter_profile(
    sandboxed: SandboxedGateway,
) -> None:
    async with translator_of(sandboxed) as (mcp, http):
        reply = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "strict"})
        started = await kernel_named(http, "lab")
    assert not reply.is_error, text(reply)
    assert text(reply) == (
        f"Created kernel lab on {sandboxed.gateway.url} (0 executions so far); "
        "sandbox: strict (no network)."
    )
    assert reply.structured_content is not None
    assert reply.structured_content["kernel"]["sandbox"] == "strict"
    assert (started["lifetime"], started["sandbox"]["profile"]) == ("persistent", "strict")
    assert started["sandbox"]["network"] is False
    assert started["sandbox"]["writable"] == [str(sandboxed.project)]


@pytest.mark.parametrize("default", ["workspace", "strict"])
async def test_the_conversation_kernel_gets_the_gateways_default(
    default: str, sandboxed: SandboxedGateway
) -> None:
    with sandboxed.default(default):
        async with translator_of(sandboxed) as (mcp, http):
            reply = await mcp.call_tool("run_cell", {"code": "1 + 1"})
            listing = await mcp.call_tool("list_kernels", {})
            assert listing.structured_content is not None
            current = await kernel_named(http, listing.structured_content["current"])
    assert not reply.is_error, text(reply)
    assert text(reply).endswith("2"), text(reply)
    assert (current["lifetime"], current["sandbox"]["profile"]) == ("conversation", default)


@pytest.mark.parametrize(
    ("default", "than"),
    [
        ("workspace", "this gateway's default (workspace)"),
        ("strict", "this gateway's default (strict)"),
    ],
)
async def test_a_looser_profile_is_refused_saying_the_person_decides(
    default: str, than: str, sandboxed: SandboxedGateway
) -> None:
    with sandboxed.default(default):
        async with translator_of(sandboxed) as (mcp, http):
            reply = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "none"})
            live = await live_kernels(http)
    assert reply.is_error
    assert text(reply) == (
        f"The sandbox profile none is looser than {than}; only the person can widen a "
        "kernel's sandbox (`loomgate run --kernel lab --sandbox none`, or sandbox.toml); "
        f"{NOTHING_CONNECTED}"
    )
    assert live == []  # no kernel started


async def test_a_gateway_that_ignores_the_profile_gets_its_kernel_stopped(tmp_path: Path) -> None:
    # Only a gateway from before sandboxes answers a profile with an unconfined kernel.
    stopped: list[str] = []

    def stop(body: dict[str, Any]) -> Answer:
        stopped.append(kernel()["id"])
        return 200, {"kernel": kernel(state="gone", alive=False)}

    routes = {
        "POST kernels": started_unconfined,
        f"DELETE kernels/{kernel()['id']}": stop,
    }
    async with (
        scripted_gateway(routes) as gateway,
        client_of(gateway.url, "legacy", tmp_path) as mcp,
    ):
        reply = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "strict"})
        listing = await mcp.call_tool("status", {})
    assert reply.is_error
    assert text(reply) == (
        f"The gateway at {gateway.url} does not run kernels under sandbox profiles, so no "
        f"kernel runs under strict; connect without sandbox for an unconfined kernel; "
        f"{NOTHING_CONNECTED}"
    )
    assert stopped == [kernel()["id"]]
    assert listing.is_error and "Nothing has run in this conversation yet" in text(listing)


async def test_a_kernel_running_under_another_profile_is_not_taken(
    sandboxed: SandboxedGateway,
) -> None:
    async with translator_of(sandboxed) as (mcp, http):
        r = await http.post(
            KERNELS, json={"name": "lab", "sandbox": "workspace", "cwd": str(sandboxed.project)}
        )
        assert r.status_code == 201, r.text
        refused = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "strict"})
        same = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "workspace"})
        live = await live_kernels(http)
    assert refused.is_error
    assert text(refused) == (
        "The kernel lab runs under the sandbox profile workspace, fixed for its life; "
        "connect(kernel='lab') without sandbox attaches to it as it is, or a new name starts a "
        f"kernel under strict; {NOTHING_CONNECTED}"
    )
    assert not same.is_error
    assert text(same) == (
        f"Connected to kernel lab on {sandboxed.gateway.url} (0 executions so far); "
        "sandbox: workspace."
    )
    assert live == [r.json()["kernel"]["id"]]  # none started


def escapes(place: SandboxedGateway) -> list[tuple[str, str, str]]:
    """Return cells that break a rule of workspace, each with the rule and the reply's line."""
    token = place.gateway.state_dir / "token"
    outside = place.root / "outside.txt"  # the person may write there; the kernel may not
    return [
        (
            f"open({str(token)!r}).read()",
            "hidden",
            f"{token} is hidden from this kernel by its sandbox (workspace).",
        ),
        (
            f"open({str(outside)!r}, 'w')",
            "read_only",
            f"Sandbox (workspace): {outside} is not writable from this kernel; it may write in "
            f"{place.project} and its own /tmp.",
        ),
    ]


@pytest.mark.parametrize("escape", [0, 1], ids=["hidden", "read_only"])
async def test_status_and_run_cell_say_which_rule_a_cell_broke(
    escape: int, sandboxed: SandboxedGateway
) -> None:
    code, rule, line = escapes(sandboxed)[escape]
    async with translator_of(sandboxed) as (mcp, _):
        ran = await mcp.call_tool("run_cell", {"code": code})
        assert ran.structured_content is not None
        number = ran.structured_content["execution"]
        status = await mcp.call_tool("status", {"execution": number})
    assert ran.structured_content["state"] == "error", text(ran)
    assert text(ran).split("\n")[-1] == line
    assert ran.structured_content["sandbox_rule"] == rule
    assert line in text(status).split("\n")


async def test_a_real_gateways_kernel_with_no_profile_is_not_taken_for_one(
    connect_client: Any,
) -> None:
    name = f"sandbox-{uuid.uuid4().hex[:6]}"
    async with conversation(connect_client) as mcp:
        try:
            made = await mcp.call_tool("connect", {"kernel": name})
            assert not made.is_error, text(made)
            asked = await mcp.call_tool("connect", {"kernel": name, "sandbox": "strict"})
            # Whatever profile the gateway gave it, it is not the one asked for.
            assert asked.is_error
            # …and the conversation stays on the kernel it had.
            assert text(asked).endswith(
                f"a new name starts a kernel under strict; this conversation's cells still go "
                f"to kernel {name} (python)"
            )
            status = await mcp.call_tool("status", {})
            assert "sandbox: " in text(status)
        finally:
            await mcp.call_tool("stop_kernel", {"kernel": name})
