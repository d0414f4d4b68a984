"""A conversation's tool calls reach the gateway for the monitor, without touching results."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from loomgate.shared.events import TOOL_CALL_TEXT, TOOL_CALL_TEXT_KEPT, ToolCallReport
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.mcp_server import tool_reports
from loomgate.translator.mcp_server.tool_reports import ToolReports
from tests.support.gateways import GatewayProcess, free_port
from tests.support.mcp_clients import conversation, text
from tests.support.sse import events, next_event

API = "/api/loomgate"


async def tool_calls(http: httpx.AsyncClient, conversation_label: str | None = None) -> list[Any]:
    """Return the gateway's kept tool calls (of one conversation)."""
    r = await http.get(
        f"{API}/tool-calls", params={"conversation": conversation_label, "limit": 2000}
    )
    assert r.status_code == 200
    return list(r.json()["tool_calls"])


async def test_tool_calls_are_reported_with_their_summary(
    connect_client: Any, http: httpx.AsyncClient
) -> None:
    async with events(http) as stream, conversation(connect_client) as mcp:
        code = "print('hello from the cell')\n" + "x = 1\n" * 200
        result = await mcp.call_tool("run_cell", {"code": code})
        event = await next_event(stream, "tool_call")
        call = event["tool_call"]
        assert call["tool"] == "run_cell"
        assert call["error"] is False
        assert call["summary"] == text(result)[:TOOL_CALL_TEXT]
        assert call["arguments"]["code"].startswith("print('hello from the cell')")
        assert call["arguments"]["code"].endswith(f"… (+{len(code) - TOOL_CALL_TEXT} characters)")
        assert call["conversation"].startswith("conversation ")
        assert call["kernel_id"] == event["kernel_id"] is not None
        assert 0 <= call["duration"] < 60
        # The cell it ran names the same conversation as its submitter, and so does the hold.
        r = await http.get(f"{API}/kernels/{call['kernel_id']}/executions/latest")
        assert r.json()["execution"]["client"] == call["conversation"]
        r = await http.get(f"{API}/kernels/{call['kernel_id']}")
        assert r.json()["kernel"]["held_by"] == [call["conversation"]]
        failed = await mcp.call_tool("read_output", {"execution": 99})
        assert failed.is_error
        event = await next_event(stream, "tool_call")
        assert event["tool_call"]["tool"] == "read_output"
        assert event["tool_call"]["error"] is True
        assert event["tool_call"]["summary"] == text(failed)
        assert event["tool_call"]["arguments"] == {"execution": "99"}
        mine = await tool_calls(http, call["conversation"])
        assert [c["tool"] for c in mine] == ["run_cell", "read_output"]


class Unreachable(GatewayClient):
    """A client of a gateway that is not there, which records the reports it is asked to send."""

    def __init__(self) -> None:
        super().__init__(f"http://127.0.0.1:{free_port()}", "token")
        self.sent: list[list[ToolCallReport]] = []

    async def report_tool_calls(self, calls: list[ToolCallReport]) -> None:
        self.sent.append(calls)
        await super().report_tool_calls(calls)


async def test_an_unreachable_gateway_costs_a_report_nothing_else() -> None:
    closed = Unreachable()
    reports = ToolReports("conversation test")
    try:
        started = time.perf_counter()
        reports.report(closed, "status", {}, "fine", time.time(), None)
        assert time.perf_counter() - started < 0.05  # queued, not sent on the caller's time
        assert closed.sent == []
        await reports.flush()  # sent, and failed quietly
        assert [[report["summary"] for report in batch] for batch in closed.sent] == [["fine"]]
        await reports.flush()  # nothing is left to send
        assert len(closed.sent) == 1
    finally:
        await closed.aclose()


async def test_a_full_queue_drops_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tool_reports, "QUEUE_SIZE", 3)
    closed = Unreachable()
    reports = ToolReports("conversation test")
    try:
        for n in range(5):
            reports.report(closed, "status", {}, f"call {n}", time.time(), None)
        reports.report(None, "status", {}, "no gateway yet", time.time(), None)
        await reports.flush()
        # The first three went in one batch; the full queue dropped the others, and a report
        # without a gateway had nowhere to go.
        summaries = [[report["summary"] for report in batch] for batch in closed.sent]
        assert summaries == [["call 0", "call 1", "call 2"]]
    finally:
        await closed.aclose()


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        ({}, "tool_calls must be a list of 1 to 100 reports"),
        ({"tool_calls": []}, "tool_calls must be a list of 1 to 100 reports"),
        ({"tool_calls": ["x"]}, "each of tool_calls must be an object"),
        ({"tool_calls": [{"tool": "t"}]}, "conversation (a string) is required"),
        (
            {"tool_calls": [{"conversation": "c", "tool": "t", "summary": "s"}]},
            "duration (a number, 0 or more) is required",
        ),
        (
            {
                "tool_calls": [
                    {"conversation": "c", "tool": "t", "summary": "s", "duration": 1, "error": 1}
                ]
            },
            "error must be true or false",
        ),
    ],
)
async def test_bad_reports_are_refused_whole(
    http: httpx.AsyncClient, body: dict[str, Any], refusal: str
) -> None:
    before = await tool_calls(http)
    r = await http.post(f"{API}/tool-calls", json=body)
    assert r.status_code == 400
    assert r.json()["message"] == refusal
    assert await tool_calls(http) == before


async def test_reports_are_shortened_and_numbered(
    gateway: GatewayProcess, http: httpx.AsyncClient
) -> None:
    report = {
        "conversation": "conversation shortened",
        "tool": "run_cell",
        "arguments": {"code": "x" * 5000, "wait_seconds": 3},
        "summary": "y" * 5000,
        "duration": 0.5,
        "error": False,
        "kernel_id": None,
    }
    r = await http.post(f"{API}/tool-calls", json={"tool_calls": [report, report]})
    assert r.status_code == 202
    first, second = r.json()["tool_calls"]
    assert second["id"] == first["id"] + 1
    assert first["arguments"] == {
        "code": "x" * TOOL_CALL_TEXT_KEPT + f"… (+{5000 - TOOL_CALL_TEXT_KEPT} characters)",
        "wait_seconds": "3",
    }
    assert (
        first["summary"]
        == "y" * TOOL_CALL_TEXT_KEPT + f"… (+{5000 - TOOL_CALL_TEXT_KEPT} characters)"
    )
    kept = await tool_calls(http, "conversation shortened")
    assert [c["id"] for c in kept][-2:] == [first["id"], second["id"]]
    r = await http.get(f"{API}/tool-calls", params={"since": first["id"]})
    assert [c["id"] for c in r.json()["tool_calls"]] == [second["id"]]


async def test_only_streams_of_all_kernels_get_tool_calls(
    http: httpx.AsyncClient, kernel: str
) -> None:
    report = {
        "conversation": "conversation filtered",
        "tool": "status",
        "summary": "idle",
        "duration": 0.001,
        "kernel_id": kernel,
    }
    async with events(http) as everything, events(http, kernel) as one_kernel:
        r = await http.post(f"{API}/tool-calls", json={"tool_calls": [report]})
        assert r.status_code == 202
        r = await http.post(f"{API}/kernels/{kernel}/executions", json={"code": "1"})
        assert r.status_code == 201
        # Events reach every stream in the order they were published: the tool call first.
        seen = [(await anext(one_kernel))["event"]]
        while seen[-1] != "execution":
            seen.append((await anext(one_kernel))["event"])
        assert "tool_call" not in seen
        event = await next_event(everything, "tool_call")
        assert event["tool_call"]["kernel_id"] == kernel


async def test_a_conversations_last_calls_are_reported_as_it_ends(
    connect_client: Any, http: httpx.AsyncClient
) -> None:
    async with conversation(connect_client) as mcp:
        result = await mcp.call_tool("run_cell", {"code": "'last words'"})
        kernel = result.structured_content["kernel"]
    # The conversation ended at once after its last call (stop_kernel, by the helper).
    r = await http.get(f"{API}/kernels/{kernel}/executions/latest")
    label = r.json()["execution"]["client"]
    assert [c["tool"] for c in await tool_calls(http, label)] == [
        "run_cell",
        "list_kernels",
        "stop_kernel",
    ]
