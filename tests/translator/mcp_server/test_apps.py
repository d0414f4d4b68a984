"""MCP Apps through the SDK's real client, with and without the extension, in both eras: the
view named only for Apps clients, everything else as it is without it, and the app-only tools."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult

from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.apps_hosts import apps_extension
from tests.support.cells import PNG
from tests.support.mcp_clients import ERAS, conversation, stop_conversation_kernel, text

VIEW = "ui://loomgate/execution"
VIEWED = ("run_cell", "wait", "read_output")
NAMED = "loomgate/execution"  # the result `_meta` entry naming the execution shown
APP_TOOLS = [
    "view_execution",
    "view_output",
    "view_rich",
    "view_traceback",
    "view_interrupt",
    "view_send_input",
]


def offline_server() -> Any:
    """Return a translator whose gateway is never reached (listings need none)."""
    settings = Settings(gateway="http://127.0.0.1:9", autostart=False, cwd="", env={})
    return build_server(settings)


def wire_json(model: Any) -> str:
    """Return a listing as it goes on the wire (compact JSON)."""
    return json.dumps(model.model_dump(by_alias=True, exclude_none=True, mode="json"))


@pytest.mark.parametrize("era", ERAS)
async def test_the_viewed_tools_name_the_view_only_with_apps(era: str) -> None:
    async with Client(offline_server(), mode=era) as plain:
        without = (await plain.list_tools()).tools
        resources_without = (await plain.list_resources()).resources
    async with Client(offline_server(), mode=era, extensions=[apps_extension()]) as host:
        with_apps = (await host.list_tools()).tools
        resources_with = (await host.list_resources()).resources
    assert [tool.name for tool in without] == [
        "run_cell",
        "wait",
        "read_output",
        "search_output",
        "interrupt",
        "reset",
        "send_input",
        "status",
        "connect",
        "checkpoint",
        "rollback",
        "list_kernels",
        "stop_kernel",
    ]
    assert all(tool.meta is None for tool in without)
    assert resources_without == []
    model_visible = [
        t for t in with_apps if "model" in (t.meta or {}).get("ui", {}).get("visibility", ["model"])
    ]
    assert [t.name for t in with_apps] == [t.name for t in without] + APP_TOOLS
    for tool in model_visible:
        expected = {"ui": {"resourceUri": VIEW}} if tool.name in VIEWED else None
        assert tool.meta == expected, tool.name
    # Apart from the three `_meta.ui`, the model is offered byte for byte what others see.
    stripped = [t.model_copy(update={"meta": None}) for t in model_visible]
    assert [wire_json(t) for t in stripped] == [wire_json(t) for t in without]
    for tool in with_apps[len(without) :]:
        assert tool.meta == {"ui": {"resourceUri": VIEW, "visibility": ["app"]}}
        assert "token" not in tool.input_schema["properties"]
        assert "path" not in tool.input_schema["properties"]
    [view] = resources_with
    assert (view.uri, view.mime_type) == (VIEW, "text/html;profile=mcp-app")


@pytest.mark.parametrize("era", ERAS)
async def test_the_view_is_one_self_contained_mcp_app_document(era: str) -> None:
    async with Client(offline_server(), mode=era, extensions=[apps_extension()]) as host:
        [content] = (await host.read_resource(VIEW)).contents
    assert content.mime_type == "text/html;profile=mcp-app"
    html = content.text
    assert html.startswith("<!doctype html>")
    assert "/*SCRIPT*/" not in html and "/*STYLE*/" not in html
    # Nothing fetched: no external script, stylesheet, font or frame, no fetch() call.
    assert not re.search(r"<(script|link|iframe|img)[^>]*\s(src|href)=", html)
    assert "fetch(" not in html and "@import" not in html and "XMLHttpRequest" not in html
    assert re.search(r"https?://", html) is None
    assert "function renderExecution" in html  # the renderer the monitor page shares


@pytest.mark.parametrize("era", ERAS)
async def test_app_only_tools_are_refused_without_apps(era: str) -> None:
    async with Client(offline_server(), mode=era) as plain:
        for name in APP_TOOLS:
            arguments: dict[str, Any] = {"execution": 1}
            arguments.update(
                {"view_rich": {"index": 0}, "view_send_input": {"value": "x"}}.get(name, {})
            )
            refused = await plain.call_tool(name, arguments)
            assert refused.is_error, name
            assert text(refused) == (
                f"{name} serves loomgate's execution view inside an MCP Apps host; this client "
                "did not negotiate the MCP Apps extension (io.modelcontextprotocol/ui)."
            )


@pytest.mark.parametrize("era", ERAS)
async def test_app_tools_take_the_models_argument_rules(era: str) -> None:
    async with Client(offline_server(), mode=era, extensions=[apps_extension()]) as host:
        token = await host.call_tool("view_execution", {"execution": 1, "token": "abc"})
        assert token.is_error
        assert text(token).startswith("view_execution has no argument 'token'; nothing was run.")
        path = await host.call_tool("view_output", {"execution": 1, "path": "/etc/passwd"})
        assert text(path).startswith("view_output has no argument 'path'")
        bad = await host.call_tool("view_rich", {"execution": 1, "index": -1})
        assert bad.is_error and text(bad).startswith("Invalid arguments for view_rich: index")


def without_view(result: CallToolResult) -> CallToolResult:
    """Return `result` without the `_meta` entry that names the view's execution."""
    meta = {k: v for k, v in (result.meta or {}).items() if k != NAMED}
    return result.model_copy(update={"meta": meta or None})


def comparable(result: CallToolResult) -> str:
    """Return a result as JSON without what differs between two runs of the same cell: times,
    and the kernel's id."""
    data = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    encoded = json.dumps(data, sort_keys=True)
    encoded = re.sub(r"\((\d+(\.\d+)? (ms|s))\)", "(T)", encoded)
    encoded = re.sub(r'"elapsed_seconds": [0-9.e-]+', '"elapsed_seconds": 0', encoded)
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]{14,}", "ID", encoded)


CELLS = [
    "print('hello')\n40 + 2",
    "1/0",
    "from IPython.display import display, Image\nimport base64\n"
    f"display(Image(data=base64.b64decode({PNG!r})))",
    "print('\\n'.join(str(i) for i in range(500)))",
]


async def test_results_without_apps_are_as_they_are_and_name_the_execution_with_it(
    connect_client: Any,
) -> None:
    async with (
        conversation(connect_client) as plain,
        conversation(lambda: connect_client(extensions=[apps_extension()])) as host,
    ):
        for number, code in enumerate(CELLS, start=1):
            result = await plain.call_tool("run_cell", {"code": code})
            viewed = await host.call_tool("run_cell", {"code": code})
            assert NAMED not in (result.meta or {})
            kernel = viewed.structured_content["kernel"]
            assert viewed.meta[NAMED] == {"kernel": kernel, "execution": number}  # and no more
            assert comparable(without_view(viewed)) == comparable(result)
        for name, arguments in [("wait", {}), ("read_output", {"lines": "1:3"})]:
            result = await plain.call_tool(name, arguments)
            viewed = await host.call_tool(name, arguments)
            assert NAMED not in (result.meta or {})
            kernel = viewed.structured_content["kernel"]
            assert viewed.meta[NAMED] == {"kernel": kernel, "execution": len(CELLS)}
            assert comparable(without_view(viewed)) == comparable(result)
        status = await host.call_tool("status", {})
        assert NAMED not in (status.meta or {})  # only the three viewed tools name one


async def test_the_app_tools_read_and_act_for_the_person(connect_client: Any) -> None:
    async with connect_client(extensions=[apps_extension()]) as host:
        try:
            await host.call_tool("run_cell", {"code": "print('a\\nb')\n7"})
            viewed = await host.call_tool("view_execution", {"execution": 1, "head": 1, "tail": 1})
            assert not viewed.is_error, text(viewed)
            assert text(viewed) == "In [1]: completed"
            execution = viewed.structured_content["execution"]
            assert execution["code"] == "print('a\\nb')\n7"
            assert [line["text"] for line in execution["output"]["head"]] == ["a"]
            assert [line["text"] for line in execution["output"]["tail"]] == ["7"]
            page = await host.call_tool("view_output", {"execution": 1, "lines": "2:3"})
            assert [line["text"] for line in page.structured_content["lines"]] == ["b", "7"]

            image = "from IPython.display import Image\nimport base64\n"
            image += f"Image(data=base64.b64decode({PNG!r}))"
            await host.call_tool("run_cell", {"code": image})
            rich = await host.call_tool("view_rich", {"execution": 2, "index": 0})
            data = rich.structured_content["data"]["image/png"]
            assert base64.b64decode(data) == base64.b64decode(PNG)

            await host.call_tool("run_cell", {"code": "1/0"})
            coloured = await host.call_tool("view_traceback", {"execution": 3})
            assert "\x1b[" in coloured.structured_content["text"]
            assert "ZeroDivisionError" in coloured.structured_content["text"]

            waiting = "import getpass\nprint(len(getpass.getpass('pw: ')))"
            await host.call_tool("run_cell", {"code": waiting, "wait_seconds": 5})
            answered = await host.call_tool(
                "view_send_input", {"execution": 4, "value": "s3cret-pw"}
            )
            assert not answered.is_error, text(answered)
            assert "s3cret-pw" not in json.dumps(answered.model_dump(mode="json"))
            ended = await host.call_tool("wait", {"execution": 4})
            assert text(ended).endswith("9")

            stale = await host.call_tool("view_interrupt", {"execution": 4})
            assert stale.is_error
            assert (
                text(stale) == "In [4] is not running (it is completed); nothing was interrupted."
            )
            await host.call_tool(
                "run_cell", {"code": "import time; time.sleep(60)", "wait_seconds": 0.5}
            )
            # The button of a view still showing In [4] reaches the gateway as In [5] runs:
            # the gateway refuses it, and In [5] runs on.
            late = await host.call_tool("view_interrupt", {"execution": 4})
            assert text(late) == text(stale)
            running = await host.call_tool("status", {"execution": 5})
            assert running.structured_content["state"] == "running"
            stopped = await host.call_tool("view_interrupt", {"execution": 5})
            assert stopped.structured_content["execution"]["state"] == "interrupted"

            unknown = await host.call_tool("view_execution", {"kernel": "no-such-kernel"})
            assert unknown.is_error and "\n" not in text(unknown)
        finally:
            await stop_conversation_kernel(host)
