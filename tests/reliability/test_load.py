"""Load: eight translators on eight kernels at once, four racing for one kernel; nothing lost."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from tests.support.figures import Figure, scaled
from tests.support.gateways import GatewayProcess
from tests.support.mcp_clients import stop_conversation_kernel, text
from tests.support.translators import stdio

TRANSLATORS = 8
CELLS = scaled(200)
LINES = 5
RACERS = 4
RACES = scaled(20)


def cell(tag: str, i: int) -> tuple[str, list[str]]:
    """Return the code of cell `i` of translator `tag`, and the lines it prints."""
    code = f"for j in range({LINES}): print('{tag} cell {i} line', j)"
    return code, [f"{tag} cell {i} line {j}" for j in range(LINES)]


async def recorded_lines(http: httpx.AsyncClient, kernel: str, number: int) -> list[str]:
    """Return the combined output lines of one record, as the gateway stored them."""
    r = await http.get(f"/api/loomgate/kernels/{kernel}/executions/{number}/streams/combined")
    assert r.status_code == 200, r.text
    return [line["text"] for line in r.json()["lines"]]


async def drive(mcp: Client, tag: str, token: str) -> tuple[str, dict[int, list[str]]]:
    """Run CELLS cells through one translator; return its kernel and what each cell printed."""
    printed: dict[int, list[str]] = {}
    kernel = ""
    for i in range(CELLS):
        code, lines = cell(tag, i)
        result = await mcp.call_tool("run_cell", {"code": code, "wait_seconds": 120})
        reply = text(result)
        assert not result.is_error, reply
        assert token not in reply
        data = result.structured_content or {}
        assert data["state"] == "completed", reply
        assert reply.split("\n")[1:] == lines
        printed[data["execution"]] = lines
        kernel = data["kernel"]
    return kernel, printed


async def test_eight_translators_on_eight_kernels(
    gateway: GatewayProcess, http: httpx.AsyncClient, figure: Figure
) -> None:
    kernels: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                Client(stdio(gateway), mode="legacy" if i % 2 else "auto")
            )
            for i in range(TRANSLATORS)
        ]
        try:
            runs = await asyncio.gather(
                *(drive(mcp, f"t{i}", gateway.token) for i, mcp in enumerate(clients))
            )
            kernels = [kernel for kernel, _ in runs]
            assert len(set(kernels)) == TRANSLATORS, "each conversation has its own kernel"
            for kernel, printed in runs:
                assert sorted(printed) == list(range(1, CELLS + 1)), "numbers are gap-free"
                for number, lines in printed.items():
                    assert await recorded_lines(http, kernel, number) == lines
        finally:
            for mcp in clients:
                await stop_conversation_kernel(mcp)
    figure(
        scenario="load: 8 translators × 8 kernels",
        checked="every reply and every stored record equals what its cell printed; "
        "numbers 1..N without gaps",
        translators=TRANSLATORS,
        cells=TRANSLATORS * CELLS,
        lines=TRANSLATORS * CELLS * LINES,
    )


async def race(
    clients: list[Client], gate: Path, round_number: int
) -> tuple[int, int, list[str], Client]:
    """Have every client submit a cell at once; return the winner's number, refusals, texts."""
    code = (
        "import os, time\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.002)\n"
        f"print('round {round_number} won by', WHO)"
    )
    results: list[Any] = await asyncio.gather(
        *(
            mcp.call_tool(
                "run_cell", {"code": code.replace("WHO", repr(f"r{i}")), "wait_seconds": 0}
            )
            for i, mcp in enumerate(clients)
        )
    )
    winners = [(i, r) for i, r in enumerate(results) if not r.is_error]
    refusals = [text(r) for r in results if r.is_error]
    assert len(winners) == 1, [text(r) for r in results]
    index, won = winners[0]
    number = won.structured_content["execution"]
    for refusal in refusals:  # every one names the winner, exactly
        assert refusal == (
            f"The kernel is busy running In [{number}]; the cell was not run. "
            f"Use wait(execution={number}) to wait for it or interrupt() to stop it."
        ), refusal
    return number, index, refusals, clients[index]


async def test_four_translators_race_for_one_kernel(
    gateway: GatewayProcess,
    http: httpx.AsyncClient,
    tmp_path: Path,
    figure: Figure,
) -> None:
    name = f"race-{uuid.uuid4().hex[:8]}"
    numbers: list[int] = []
    refused = 0
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(stdio(gateway))) for _ in range(RACERS)]
        try:
            for mcp in clients:
                attached = await mcp.call_tool("connect", {"kernel": name})
                assert not attached.is_error, text(attached)
            for r in range(RACES):
                gate = tmp_path / f"go-{r}"
                number, index, refusals, winner = await race(clients, gate, r)
                refused += len(refusals)
                gate.touch()
                done = await winner.call_tool("wait", {"execution": number, "wait_seconds": 60})
                assert text(done).split("\n")[1:] == [f"round {r} won by r{index}"]
                assert await recorded_lines(http, name, number) == [f"round {r} won by r{index}"]
                numbers.append(number)
        finally:
            await clients[0].call_tool("stop_kernel", {"kernel": name})
    assert numbers == list(range(1, RACES + 1)), "exactly one cell per race, no gaps"
    assert refused == RACES * (RACERS - 1)
    figure(
        scenario="load: 4 translators race for one kernel",
        checked="each race has exactly one winner, every other call a busy refusal naming the "
        "winner's In [N]; numbers gap-free; outputs stored whole",
        races=RACES,
        refusals=refused,
    )
