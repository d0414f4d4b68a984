"""A cell's result as the model gets it: one image for identical image bytes within a result."""

from __future__ import annotations

import base64
from typing import Any

import httpx

from tests.support.cells import PNG, PNG_8X8
from tests.support.gateways import GatewayProcess
from tests.support.mcp_clients import conversation

SHOW = "from IPython.display import display, Image\nimport base64\n"


def images(result: Any) -> list[bytes]:
    """Return the image bytes of a tool result's content, in order."""
    return [base64.b64decode(block.data) for block in result.content if block.type == "image"]


async def test_a_figure_displayed_and_returned_comes_back_once(
    connect_client: Any, gateway: GatewayProcess
) -> None:
    # As `plt.plot(…); fig` does: display_data, then the same bytes as the execute_result.
    code = f"{SHOW}png = Image(data=base64.b64decode({PNG!r}))\ndisplay(png)\npng"
    async with conversation(connect_client) as mcp:
        result = await mcp.call_tool("run_cell", {"code": code})
        assert images(result) == [base64.b64decode(PNG)]
        assert result.structured_content["images"] == 2  # the record keeps both outputs
        kernel = result.structured_content["kernel"]
        async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers) as http:
            record = await http.get(f"/api/loomgate/kernels/{kernel}/executions/1")
        assert [rich["result"] for rich in record.json()["execution"]["rich"]] == [False, True]


async def test_different_images_all_come_back_and_a_repeat_once(connect_client: Any) -> None:
    code = (
        f"{SHOW}display(Image(data=base64.b64decode({PNG!r})))\n"
        f"display(Image(data=base64.b64decode({PNG_8X8!r})))\n"
        f"display(Image(data=base64.b64decode({PNG!r})))"
    )
    async with conversation(connect_client) as mcp:
        result = await mcp.call_tool("run_cell", {"code": code})
        assert images(result) == [base64.b64decode(PNG), base64.b64decode(PNG_8X8)]
