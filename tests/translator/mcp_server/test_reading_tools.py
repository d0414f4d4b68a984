"""read_output and search_output as a model meets them: bounded replies, code found as typed."""

from __future__ import annotations

import json
from typing import Any

from tests.support.mcp_clients import conversation, text

BUDGET = 20_000  # the default --max-chars, run_cell's reply budget


async def test_read_output_stays_within_the_budget(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await mcp.call_tool("run_cell", {"code": "for i in range(300_000): print('line', i)"})
        result = await mcp.call_tool("read_output", {"execution": 1, "lines": "101:299900"})
        reply = text(result)
        assert len(reply) <= BUDGET + 300, len(reply)
        body = reply.split("\n")
        assert body[0].startswith("In [1] combined, lines 101–")
        last = int(body[-2].split("│")[0])
        assert body[-2] == f"{last}│line {last - 1}"
        assert body[-1] == (
            f'… the range goes on; read_output(execution=1, lines="{last + 1}:299900") reads on'
        )
        data = result.structured_content
        if data is not None:  # never larger than the text
            assert (data["first"], len(data["lines"])) == (101, last - 100)
            assert data["read_on"] == f"{last + 1}:299900"
            assert len(json.dumps(data, ensure_ascii=False)) <= len(reply)


async def test_a_single_huge_line_is_clipped_with_its_length(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await mcp.call_tool("run_cell", {"code": "print('z' * 5_000_000)"})
        result = await mcp.call_tool("read_output", {"execution": 1})
        reply = text(result)
        assert len(reply) <= BUDGET + 200, len(reply)
        assert reply.split("\n")[1] == "1│" + "z" * BUDGET + f" …[+{5_000_000 - BUDGET:,} chars]"


async def test_search_finds_code_as_typed(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await mcp.call_tool("run_cell", {"code": "print('----> 4 f(0)')\nprint('f0')"})
        found = await mcp.call_tool("search_output", {"query": "f(0)"})
        assert text(found).split("\n") == [
            "2 matches for 'f(0)' (literal or regex) in In [1] combined:",
            "In [1]:",
            "M 1│----> 4 f(0)",
            "M 2│f0",
        ]
        literal = await mcp.call_tool("search_output", {"query": "f(0)", "mode": "literal"})
        assert text(literal).split("\n")[2:] == ["M 1│----> 4 f(0)"]


async def test_search_echoes_backslashes_as_typed(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await mcp.call_tool("run_cell", {"code": "print('LINE 123')"})
        found = await mcp.call_tool("search_output", {"query": r"LINE 1\d\d$"})
        assert text(found).split("\n")[0] == (
            r"1 match for 'LINE 1\d\d$' (literal or regex) in In [1] combined:"
        )


async def test_search_results_stay_within_the_budget(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        ran = await mcp.call_tool(
            "run_cell", {"code": "for i in range(100): print('hit', 'x' * 1000)"}
        )
        assert not ran.is_error, text(ran)
        found = await mcp.call_tool("search_output", {"query": "hit", "max_matches": 100})
        reply = text(found)
        assert len(reply) <= BUDGET + 300, len(reply)
        last = reply.split("\n")[-1]
        assert last.startswith("… ") and "more matches not shown (the reply is full)" in last
        assert last.endswith(
            'read_output(execution=1, lines="{0}:{0}")'.format(
                int(last.split("line ")[1].split(":")[0])
            )
        )


NOTHING_RUN = (
    "Nothing has run in this conversation yet: run_cell starts its kernel, and connect attaches "
    "to an existing one (list_kernels shows them)."
)


async def test_looking_never_creates_a_kernel(connect_client: Any) -> None:
    async with connect_client() as mcp:
        before = text(await mcp.call_tool("list_kernels", {}))
        for tool, arguments in [
            ("status", {}),
            ("read_output", {}),
            ("search_output", {"query": "x"}),
            ("wait", {}),
            ("interrupt", {}),
            ("send_input", {"value": "x"}),
            ("reset", {}),
        ]:
            result = await mcp.call_tool(tool, arguments)
            assert (result.is_error, text(result)) == (True, NOTHING_RUN), tool
        assert text(await mcp.call_tool("list_kernels", {})) == before


async def test_unknown_arguments_are_refused_and_nothing_runs(connect_client: Any) -> None:
    async with connect_client() as mcp:
        result = await mcp.call_tool("run_cell", {"code": "1", "timeout": 5})
        assert result.is_error
        assert text(result) == (
            "run_cell has no argument 'timeout' (did you mean wait_seconds?); nothing was run. "
            "It takes: code, wait_seconds, full_output, kernel."
        )
        result = await mcp.call_tool("read_output", {"executon": 1, "range": "1:2"})
        assert text(result) == (
            "read_output has no arguments 'executon' (did you mean execution?), 'range' (did "
            "you mean lines?); nothing was run. It takes: execution, stream, lines, max_chars, "
            "kernel."
        )
        assert text(await mcp.call_tool("status", {})) == NOTHING_RUN


async def test_refusals_name_real_executions(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await mcp.call_tool("run_cell", {"code": "1 / 0"})
        zero = await mcp.call_tool("read_output", {"execution": 0})
        assert (zero.is_error, text(zero)) == (
            True,
            "no execution 0 on this kernel; executions are 1 to 1",
        )
        answer = await mcp.call_tool("send_input", {"value": "x"})
        assert text(answer) == "In [1] is not waiting for input; it ended with an error."
        missing = await mcp.call_tool("search_output", {"query": "zzz"})
        assert text(missing) == "No lines match 'zzz' (literal) in In [1] combined."


async def test_a_stopped_kernels_history_stays_reachable(connect_client: Any) -> None:
    async with connect_client() as mcp:
        await mcp.call_tool("connect", {"kernel": "kept-history"})
        await mcp.call_tool("run_cell", {"code": "print('from before')"})
        listing = await mcp.call_tool("list_kernels", {})
        old_id = listing.structured_content["current"]
        await mcp.call_tool("stop_kernel", {"kernel": "kept-history"})
        live = await mcp.call_tool("list_kernels", {})
        assert old_id not in [k["id"] for k in live.structured_content["kernels"]]
        everything = await mcp.call_tool("list_kernels", {"include_stopped": True})
        [gone] = [k for k in everything.structured_content["kernels"] if k["id"] == old_id]
        assert gone["state"] == "gone"  # the wire's word; every text says "stopped"
        [row] = [line for line in text(everything).split("\n") if old_id[:8] in line]
        assert row.split()[3] == "stopped", row  # name, id, spec, state
        assert "gone" not in text(everything)
        status = await mcp.call_tool("status", {"kernel": old_id[:8]})
        assert f"[{old_id[:8]}] on " in text(status)
        assert text(status).split("\n")[0].split(": ")[1].startswith("stopped, persistent")
        read = await mcp.call_tool("read_output", {"kernel": "kept-history", "execution": 1})
        assert text(read).split("\n")[1:] == ["1│from before"]
        found = await mcp.call_tool("search_output", {"kernel": "kept-history", "query": "before"})
        assert text(found).split("\n")[2:] == ["M 1│from before"]
        again = await mcp.call_tool("connect", {"kernel": "kept-history"})
        lines = text(again).split("\n")
        assert lines[0].startswith("Created kernel kept-history on ")
        assert lines[0].endswith("(0 executions so far); sandbox: none.")  # the suite's default
        short = old_id[:8]
        assert lines[1] == (
            f"The earlier kernel named kept-history ({short}) was stopped; its 1 execution "
            f"stays readable: read_output(kernel={short!r}, execution=N) or "
            f"search_output(kernel={short!r}, …)."
        )
        by_id = await mcp.call_tool("connect", {"kernel": short})
        assert by_id.is_error and text(by_id).startswith(f"kernel {short} was stopped;")
        await mcp.call_tool("stop_kernel", {"kernel": "kept-history"})


async def test_a_kernel_name_that_runs_nothing_points_to_connect(connect_client: Any) -> None:
    async with connect_client() as mcp:
        result = await mcp.call_tool("run_cell", {"code": "1", "kernel": "insp-missing"})
        assert result.is_error
        assert text(result) == (
            "no kernel named 'insp-missing', with an id starting 'insp-missing', or serving a "
            "notebook 'insp-missing'. connect(kernel=\"insp-missing\") starts a persistent "
            "kernel by that name; list_kernels() shows the running ones."
        )
        listing = await mcp.call_tool("list_kernels", {})
        assert listing.structured_content["current"] is None  # nothing was started


async def test_a_range_past_the_end_of_a_finished_cell_is_an_error(
    connect_client: Any,
) -> None:
    async with conversation(connect_client) as mcp:
        await mcp.call_tool("run_cell", {"code": "for i in range(50): print(i)"})
        past = await mcp.call_tool("read_output", {"execution": 1, "lines": "100:120"})
        assert (past.is_error, text(past)) == (
            True,
            "In [1] combined has 50 lines; lines 100:120 are past its end. "
            'read_output(execution=1, lines="-20:") reads its last 20 lines.',
        )
        overlapping = await mcp.call_tool("read_output", {"execution": 1, "lines": "45:120"})
        assert not overlapping.is_error
        assert text(overlapping).split("\n")[0] == "In [1] combined, lines 45–50 of 50:"
        await mcp.call_tool("run_cell", {"code": "pass"})
        empty = await mcp.call_tool("read_output", {"execution": 2, "lines": "5:9"})
        assert (empty.is_error, text(empty)) == (False, "In [2] combined is empty.")
