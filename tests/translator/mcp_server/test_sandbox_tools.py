"""connect's sandbox argument and the replies that carry a kernel's sandbox, through the real
in-memory MCP client: against a gateway that answers from a script where the real gateway does
not confine kernels yet (what is sent, a refusal, a profile ignored), else the real one."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.mcp_clients import ERAS, conversation, text
from tests.support.scripted_gateway import (
    TOKEN,
    Answer,
    Route,
    ScriptedGateway,
    created,
    info,
    refusal,
    scripted_gateway,
)
from tests.support.wire_values import execution, failure, kernel, sandbox

STRICT = sandbox(profile="strict", network=False)


@pytest.fixture(autouse=True)
def no_jupyter_servers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty Jupyter runtime dir: connect looks for the kernel on no one's servers."""
    runtime = tmp_path / "jupyter-runtime"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))


def client_of(url: str, era: str, tmp_path: Path) -> Client:
    """Return an in-memory MCP client of a translator bound to the gateway at `url`."""
    settings = Settings(
        gateway=url, autostart=False, cwd=str(tmp_path), env={"LOOMGATE_TOKEN": TOKEN}
    )
    return Client(build_server(settings), mode=era)


@asynccontextmanager
async def translator_of(
    routes: dict[str, Route], tmp_path: Path
) -> AsyncIterator[tuple[ScriptedGateway, Client]]:
    """Yield a scripted gateway answering `routes` and an MCP client of a translator of it."""
    async with (
        scripted_gateway(routes) as gateway,
        client_of(gateway.url, "legacy", tmp_path) as mcp,
    ):
        yield gateway, mcp


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


async def test_connect_asks_for_the_profile_and_never_to_widen(tmp_path: Path) -> None:
    async with translator_of({"POST kernels": lambda body: created(STRICT)}, tmp_path) as (
        gateway,
        mcp,
    ):
        reply = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "strict"})
    assert not reply.is_error, text(reply)
    assert text(reply) == (
        "Created kernel lab on " + gateway.url + " (2 executions so far); "
        "sandbox: strict (no network)."
    )
    assert reply.structured_content is not None
    assert reply.structured_content["kernel"]["sandbox"] == "strict"
    [body] = gateway.bodies("POST kernels")
    assert (body["name"], body["sandbox"], body["stricter_only"]) == ("lab", "strict", True)


async def test_the_conversation_kernel_gets_the_gateways_default(tmp_path: Path) -> None:
    def submit(body: dict[str, Any]) -> Answer:
        return 201, {"execution": execution(kernel_id=kernel()["id"]), "returned": "final"}

    routes = {
        "POST kernels": lambda body: created(sandbox()),
        f"POST kernels/{kernel()['id']}/executions": submit,
    }
    async with translator_of(routes, tmp_path) as (gateway, mcp):
        reply = await mcp.call_tool("run_cell", {"code": "x"})
    assert not reply.is_error, text(reply)
    [body] = gateway.bodies("POST kernels")
    assert "sandbox" not in body and body["stricter_only"] is True
    assert body["lifetime"] == "conversation"


def forbidden(body: dict[str, Any]) -> Answer:
    return refusal(403, "forbidden", "the profile none is looser than the default workspace")


@pytest.mark.parametrize(
    ("default", "than"),
    [
        ("workspace", "this gateway's default (workspace)"),
        ("strict", "this gateway's default (strict)"),
    ],
)
async def test_a_looser_profile_is_refused_saying_the_person_decides(
    default: str, than: str, tmp_path: Path
) -> None:
    routes: dict[str, Callable[[dict[str, Any]], Answer]] = {
        "POST kernels": forbidden,
        "GET info": lambda body: (200, info(sandbox_default=default)),
    }
    async with translator_of(routes, tmp_path) as (gateway, mcp):
        reply = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "none"})
    assert reply.is_error
    assert text(reply) == (
        f"The sandbox profile none is looser than {than}; only the person can widen a "
        "kernel's sandbox (`loomgate run --kernel lab --sandbox none`, or sandbox.toml)."
    )
    assert gateway.bodies("POST kernels")[0]["stricter_only"] is True


async def test_a_gateway_that_ignores_the_profile_gets_its_kernel_stopped(tmp_path: Path) -> None:
    stopped: list[str] = []

    def stop(body: dict[str, Any]) -> Answer:
        stopped.append(kernel()["id"])
        return 200, {"kernel": kernel(state="gone", alive=False)}

    routes = {
        "POST kernels": lambda body: created(None),  # it started the kernel unconfined
        f"DELETE kernels/{kernel()['id']}": stop,
    }
    async with translator_of(routes, tmp_path) as (gateway, mcp):
        reply = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "strict"})
        listing = await mcp.call_tool("status", {})
    assert reply.is_error
    assert text(reply) == (
        f"The gateway at {gateway.url} does not run kernels under sandbox profiles, so no "
        "kernel runs under strict; connect without sandbox for an unconfined kernel."
    )
    assert stopped == [kernel()["id"]]
    assert listing.is_error and "Nothing has run in this conversation yet" in text(listing)


async def test_a_kernel_running_under_another_profile_is_not_taken(tmp_path: Path) -> None:
    routes = {"GET kernels/lab": lambda body: (200, {"kernel": kernel(sandbox=sandbox())})}
    async with translator_of(routes, tmp_path) as (gateway, mcp):
        refused = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "strict"})
        same = await mcp.call_tool("connect", {"kernel": "lab", "sandbox": "workspace"})
    assert refused.is_error
    assert text(refused) == (
        "The kernel lab runs under the sandbox profile workspace, fixed for its life; "
        "connect(kernel='lab') without sandbox attaches to it as it is, or a new name starts a "
        "kernel under strict."
    )
    assert not same.is_error
    assert text(same) == (
        f"Connected to kernel lab on {gateway.url} (2 executions so far); sandbox: workspace."
    )
    assert gateway.bodies("POST kernels") == []


async def test_status_and_run_cell_say_which_rule_a_cell_broke(tmp_path: Path) -> None:
    kernel_id = kernel()["id"]
    broken = execution(
        kernel_id=kernel_id,
        state="error",
        error={"name": "OSError", "value": "[Errno 30] Read-only file system: '/etc/x'"},
        sandbox_failure=failure("read_only", "/etc/x"),
    )

    def answered(body: dict[str, Any]) -> Answer:
        return 200, {"execution": broken, "returned": "final"}

    routes = {
        "POST kernels": lambda body: created(sandbox()),
        f"POST kernels/{kernel_id}/executions": answered,
        f"GET kernels/{kernel_id}/executions/5": answered,
        f"GET kernels/{kernel_id}": lambda body: (200, {"kernel": kernel(sandbox=sandbox())}),
    }
    line = (
        "Sandbox (workspace): /etc/x is not writable from this kernel; it may write in "
        "/home/p/proj and its own /tmp."
    )
    async with translator_of(routes, tmp_path) as (_, mcp):
        ran = await mcp.call_tool("run_cell", {"code": "open('/etc/x', 'w')"})
        status = await mcp.call_tool("status", {"execution": 5})
    assert text(ran).split("\n")[-1] == line
    assert ran.structured_content is not None
    assert ran.structured_content["sandbox_rule"] == "read_only"
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
            assert "a new name starts a kernel under strict." in text(asked)
            status = await mcp.call_tool("status", {})
            assert "sandbox: " in text(status)
        finally:
            await mcp.call_tool("stop_kernel", {"kernel": name})
