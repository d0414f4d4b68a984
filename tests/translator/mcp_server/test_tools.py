"""The thirteen tools through the real MCP client, in memory, in both protocol eras."""

from __future__ import annotations

import base64
import re
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client
from mcp.types import ElicitResult

from loomgate.translator.mcp_server.settings import Settings
from tests.support.cells import PNG
from tests.support.gates import Gate
from tests.support.mcp_clients import conversation, stop_conversation_kernel, text


async def run(mcp: Client, code: str, **arguments: Any) -> Any:
    """Call run_cell and return its result."""
    return await mcp.call_tool("run_cell", {"code": code, **arguments})


async def test_state_persists_and_numbers_follow(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        first = await run(mcp, "x = 41")
        assert not first.is_error
        assert re.fullmatch(r"In \[1\] \(\d+ ms\):", text(first))
        second = await run(mcp, "print('adding')\nx + 1")
        assert re.fullmatch(r"In \[2\] \(\d+ ms\):\nadding\nOut\[2\]: 42", text(second))
        data = second.structured_content
        assert data["execution"] == 2 and data["state"] == "completed"
        assert data["returned"] == "final" and data["output_lines"] == 2


async def test_python_error_is_a_result_not_a_tool_error(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        result = await run(mcp, "1/0")
        assert not result.is_error
        assert "ZeroDivisionError: division by zero" in text(result)
        assert "\x1b" not in text(result)
        assert result.structured_content["state"] == "error"


async def test_busy_refusal_and_interrupt(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        running = await run(mcp, "import time; time.sleep(100)", wait_seconds=0.5)
        assert "In [1] is still running" in text(running)
        assert "wait(execution=1)" in text(running)
        busy = await run(mcp, "1")
        assert busy.is_error
        assert text(busy) == (
            "The kernel is busy running In [1]; the cell was not run. "
            "Use wait(execution=1) to wait for it or interrupt() to stop it."
        )
        stopped = await mcp.call_tool("interrupt", {})
        assert "In [1] (" in text(stopped) and "interrupted" in text(stopped)
        assert "KeyboardInterrupt" in text(stopped)
        again = await mcp.call_tool("interrupt", {})
        assert again.is_error and "Nothing is running" in text(again)


async def test_wait_outlasts_a_short_run_cell(connect_client: Any, gate: Gate) -> None:
    async with conversation(connect_client) as mcp:
        code = f"print('tick', 0, flush=True)\n{gate.wait}\nprint('tick', 1)\nprint('tick', 2)"
        first = await run(mcp, code, wait_seconds=0.5)
        assert first.structured_content["state"] == "running"
        gate.open()
        done = await mcp.call_tool("wait", {"execution": 1, "wait_seconds": 60})
        assert text(done).split("\n")[1:] == ["tick 0", "tick 1", "tick 2"]
        assert done.structured_content["state"] == "completed"


async def test_wait_takes_timeout_seconds_its_earlier_name_as_wait_seconds(
    connect_client: Any, gate: Gate
) -> None:
    async with conversation(connect_client) as mcp:
        await run(mcp, f"print('tick', flush=True)\n{gate.wait}", wait_seconds=0.5)
        for name in ("wait_seconds", "timeout_seconds"):
            started = time.monotonic()
            waited = await mcp.call_tool("wait", {"execution": 1, name: 0.5})
            assert 0.5 <= time.monotonic() - started < 10, name  # its value, not the default 30
            assert not waited.is_error, text(waited)
            assert waited.structured_content["returned"] == "timeout", name
            assert waited.structured_content["state"] == "running", name
        gate.open()
        done = await mcp.call_tool("wait", {"execution": 1, "timeout_seconds": 60})
        assert done.structured_content["state"] == "completed"
        assert text(done).endswith("tick")
        both = await mcp.call_tool("wait", {"wait_seconds": 1, "timeout_seconds": 1})
        assert both.is_error
        assert text(both).startswith(
            "wait has no argument 'timeout_seconds' (did you mean wait_seconds?); nothing was run."
        )


async def test_reset_keeps_history(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await run(mcp, "y = 5\nprint('kept')")
        reset = await mcp.call_tool("reset", {})
        assert "was reset" in text(reset)
        after = await run(mcp, "y")
        assert "NameError" in text(after) and after.structured_content["execution"] == 2
        old = await mcp.call_tool("read_output", {"execution": 1})
        assert text(old).endswith("1│kept")


async def test_checkpoint_and_rollback_bring_a_state_back(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await run(mcp, "data = list(range(5))")
        taken = await mcp.call_tool("checkpoint", {})
        assert not taken.is_error, text(taken)
        assert text(taken).startswith("Checkpoint after-1 of kernel ")
        assert text(taken).endswith(
            " keeps its state after In [1]; rollback(to='after-1') brings it back."
        )
        await run(mcp, "data.clear()")
        status = await mcp.call_tool("status", {})
        assert re.search(
            r"checkpoints: after-1 \(the state after In \[1\], \d+ ms ago, holds ", text(status)
        )
        rolled = await mcp.call_tool("rollback", {"to": "after-1"})
        assert not rolled.is_error, text(rolled)
        assert (
            "was rolled back to after-1 (the state after In [1]); records and numbering are kept"
            in text(rolled)
        )
        assert rolled.structured_content["action"] == "rollback"
        after = await run(mcp, "len(data)")
        assert text(after).endswith("Out[3]: 5"), text(after)
        unknown = await mcp.call_tool("rollback", {"to": "nope"})
        assert unknown.is_error and "has no checkpoint 'nope' (its checkpoints: after-1)" in text(
            unknown
        )


async def test_connect_forks_a_kernel(connect_client: Any, http: httpx.AsyncClient) -> None:
    origin, copy = f"origin-{uuid.uuid4().hex[:6]}", f"copy-{uuid.uuid4().hex[:6]}"
    try:
        async with conversation(connect_client) as mcp:
            await mcp.call_tool("connect", {"kernel": origin})
            await run(mcp, "plan = 'a'")
            forked = await mcp.call_tool("connect", {"kernel": copy, "fork": origin})
            assert not forked.is_error, text(forked)
            assert (
                f"It starts as a copy of kernel {origin}: its state after In [1] (that kernel is "
                "untouched); its own cells are numbered from In [1]."
            ) in text(forked)
            tried = await run(mcp, "plan += 'b'\nplan")
            assert text(tried).endswith("Out[1]: 'ab'")
            kept = await run(mcp, "plan", kernel=origin)
            assert text(kept).endswith("Out[2]: 'a'")
    finally:
        for name in (origin, copy):
            await http.delete(f"/api/loomgate/kernels/{name}")


async def test_long_output_head_tail_and_read(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        result = await run(mcp, "for i in range(1, 5001): print(f'line {i}')")
        lines = text(result).split("\n")
        assert lines[1] == "line 1" and lines[100] == "line 100"
        assert lines[101] == (
            "… 4,800 lines omitted (101–4,900 of 5,000); "
            'read_output(execution=1, lines="101:4900") shows them …'
        )
        assert lines[-1] == "line 5000"
        assert result.structured_content["omitted_lines"] == 4800
        middle = await mcp.call_tool("read_output", {"execution": 1, "lines": "2500:2502"})
        assert text(middle).split("\n") == [
            "In [1] combined, lines 2,500–2,502 of 5,000:",
            "2500│line 2500",
            "2501│line 2501",
            "2502│line 2502",
        ]
        assert middle.structured_content["first"] == 2500
        assert len(middle.structured_content["lines"]) == 3


async def test_full_output(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        result = await run(mcp, "for i in range(300): print(i)", full_output=True)
        assert text(result).split("\n")[1:] == [str(i) for i in range(300)]
        assert result.structured_content["omitted_lines"] == 0


async def test_full_output_keeps_to_the_reply_budget(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        code = "for i in range(100_000): print(f'line {i:06}')"  # 1.2 MB of output
        result = await run(mcp, code, full_output=True, wait_seconds=60)
        reply = text(result)
        assert len(reply) <= 20_000 + 300, len(reply)
        lines = reply.split("\n")
        shown = len(lines) - 2  # the header and the omission line
        assert lines[1:-1] == [f"line {i:06}" for i in range(shown)]
        first = shown + 1
        assert lines[-1] == (
            f"… {100_000 - shown:,} lines omitted ({first:,}–100,000 of 100,000); "
            f'read_output(execution=1, lines="{first}:100000") shows them …'
        )
        assert result.structured_content["omitted_lines"] == 100_000 - shown
        rest = await mcp.call_tool("read_output", {"execution": 1, "lines": f"{first}:100000"})
        assert text(rest).split("\n")[1] == f"{first}│line {first - 1:06}"


async def test_search_across_all(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await run(mcp, "print('alpha one')")
        await run(mcp, "print('beta')\nprint('alpha two')")
        found = await mcp.call_tool(
            "search_output", {"query": "alpha", "execution": "all", "context": 1}
        )
        assert text(found).split("\n") == [
            "2 matches for 'alpha' (literal) in all executions combined:",
            "In [1]:",
            "M 1│alpha one",
            "--",
            "In [2]:",
            "C 1│beta",
            "M 2│alpha two",
        ]
        assert found.structured_content["matches"] == 2


async def test_png_display_becomes_image_content(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        code = (
            "from IPython.display import display, Image\nimport base64\n"
            f"print('before')\ndisplay(Image(data=base64.b64decode({PNG!r})))\nprint('after')"
        )
        result = await run(mcp, code)
        kinds = [block.type for block in result.content]
        assert kinds == ["text", "image", "text"]
        assert base64.b64decode(result.content[1].data) == base64.b64decode(PNG)
        assert result.content[1].mime_type == "image/png"
        assert "<IPython.core.display.Image object>" not in text(result)


async def test_input_through_send_input(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        waiting = await run(mcp, "name = input('who? ')\nprint('hi', name)", wait_seconds=5)
        assert "In [1] is waiting for input" in text(waiting)
        assert "send_input" in text(waiting)
        assert waiting.structured_content["input_prompt"] == "who? "
        answered = await mcp.call_tool("send_input", {"value": "ada"})
        assert text(answered).endswith("hi ada")


async def test_interrupt_of_a_cell_waiting_for_input_answers_once_it_ended(
    connect_client: Any,
) -> None:
    async with conversation(connect_client) as mcp:
        waiting = await run(mcp, "name = input('who? ')", wait_seconds=5)
        assert waiting.structured_content["state"] == "awaiting_input"
        stopped = await mcp.call_tool("interrupt", {})
        assert stopped.structured_content["state"] == "interrupted", text(stopped)
        lines = text(stopped).split("\n")
        assert re.fullmatch(r"In \[1\] \(.+, interrupted\):", lines[0])
        assert "----> 1 name = input('who? ')" in lines
        assert lines[-1].startswith("KeyboardInterrupt")
        if lines[-1] == "KeyboardInterrupt: Interrupted by user":  # in ipykernel's wait, as a rule
            assert re.fullmatch(
                r"… 2 frames inside ipykernel \(kernelbase\.py\) left out; "
                r'read_output\(execution=1, lines="\d+:\d+"\) shows them …',
                lines[-3],
            )
        # else the SIGINT landed the instant before that wait (a loaded machine): elsewhere in
        # ipykernel, with other frames; the cell has ended all the same.
        assert "send_input" not in text(stopped) and "kernelbase.py:" not in text(stopped)
        after = await run(mcp, "'free'")  # not refused as busy: the cell has ended
        assert text(after).endswith("Out[2]: 'free'"), text(after)


async def test_input_through_the_host_dialog(connect_client: Any) -> None:
    prompts: list[str] = []

    async def dialog(context: Any, params: Any) -> ElicitResult:
        prompts.append(params.message)
        return ElicitResult(action="accept", content={"value": f"answer{len(prompts)}"})

    async with connect_client(elicitation_callback=dialog) as mcp:
        result = await run(mcp, "a = input('first? ')\nb = input('second? ')\nprint(a, b)")
        assert text(result).endswith("answer1 answer2")
        assert prompts == ["In [1] asks for input: first? ", "In [1] asks for input: second? "]
        await stop_conversation_kernel(mcp)


async def test_declined_dialog_leaves_the_cell_waiting(connect_client: Any) -> None:
    async def decline(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="decline")

    async with connect_client(elicitation_callback=decline) as mcp:
        result = await run(mcp, "print(input('x? '))", wait_seconds=5)
        assert result.structured_content["state"] == "awaiting_input"
        assert "send_input" in text(result)
        answered = await mcp.call_tool("send_input", {"value": "late"})
        assert text(answered).endswith("late")
        await stop_conversation_kernel(mcp)


async def test_password_prompt_is_never_sent_to_a_dialog(connect_client: Any) -> None:
    asked: list[str] = []

    async def dialog(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"value": "x"})

    async with connect_client(elicitation_callback=dialog) as mcp:
        code = "import getpass\nprint(len(getpass.getpass('pw: ')))"
        result = await run(mcp, code, wait_seconds=5)
        assert asked == []
        assert "waiting for a password" in text(result)
        await mcp.call_tool("interrupt", {})
        await stop_conversation_kernel(mcp)


async def test_progress_carries_latest_line(connect_client: Any, tmp_path: Path) -> None:
    flag = tmp_path / "seen"
    async with conversation(connect_client) as mcp:
        seen: list[str] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            seen.append(message or "")
            if re.fullmatch(r"In \[1\] running \d+ s: step 1", message or ""):
                flag.touch()  # the cell ends once a progress message showed its last line

        code = (
            "import os, time\nprint('step', 0, flush=True)\nprint('step', 1, flush=True)\n"
            f"while not os.path.exists({str(flag)!r}):\n    time.sleep(0.05)"
        )
        result = await mcp.call_tool(
            "run_cell", {"code": code, "wait_seconds": 60}, progress_callback=progress
        )
        assert result.structured_content["state"] == "completed", seen


async def test_content_mode_has_no_structured_content(
    connect_client: Any, settings: Settings
) -> None:
    content_only = Settings(**{**settings.__dict__, "result_mode": "content"})
    async with connect_client(settings=content_only) as mcp:
        tools = await mcp.list_tools()
        assert all(tool.output_schema is None for tool in tools.tools)
        result = await run(mcp, "6 * 7")
        assert result.structured_content is None
        assert text(result).endswith("Out[1]: 42")
        kernels = await mcp.call_tool("list_kernels", {})
        current = next(line for line in text(kernels).split("\n") if line.startswith("*"))
        await mcp.call_tool("stop_kernel", {"kernel": current.split()[2]})


async def test_output_schemas_are_listed_on_request_and_fit_the_results(
    connect_client: Any, settings: Settings
) -> None:
    with_schemas = Settings(**{**settings.__dict__, "output_schemas": True})
    async with conversation(lambda **kw: connect_client(settings=with_schemas, **kw)) as mcp:
        tools = await mcp.list_tools()
        assert all(tool.output_schema is not None for tool in tools.tools)
        # The SDK client validates each structuredContent against the listed (compact) schema.
        result = await run(mcp, "print('x')\nNone")
        assert result.structured_content["state"] == "completed"
        read = await mcp.call_tool("read_output", {"execution": 1})
        assert read.structured_content["lines"] == ["x"]
        listing = await mcp.call_tool("list_kernels", {"include_stopped": True})
        assert listing.structured_content["current"] is not None


async def test_structured_results_without_listed_schemas(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        tools = await mcp.list_tools()
        assert all(tool.output_schema is None for tool in tools.tools)
        result = await run(mcp, "6 * 7")
        assert result.structured_content["state"] == "completed"


async def test_list_kernels_marks_current_and_connect(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await run(mcp, "z = 1")
        listing = await mcp.call_tool("list_kernels", {})
        current = listing.structured_content["current"]
        [starred] = [line for line in text(listing).split("\n") if line.startswith("*")]
        assert starred.split()[2] == current[:8]
        typo = await mcp.call_tool("connect", {"kernel": "lab-x", "gateway": "http://127.0.0.1:1"})
        assert typo.is_error and "a URL a model names is sent no token" in text(typo)
        still = await run(mcp, "z")
        assert text(still).endswith("Out[2]: 1")
        created = await mcp.call_tool("connect", {"kernel": "persist-test"})
        assert "Created kernel persist-test" in text(created)
        assert text(await run(mcp, "'fresh'")).endswith("Out[1]: 'fresh'")
        await mcp.call_tool("stop_kernel", {"kernel": "persist-test"})
        await mcp.call_tool("stop_kernel", {"kernel": current})


ERRORS = [
    (
        "run_cell",
        {"code": 5},
        "Invalid arguments for run_cell: code: Input should be a valid string",
    ),
    ("run_cell", {"code": "1", "wait_seconds": -1}, "wait_seconds: Input should be greater than"),
    ("search_output", {"query": "x", "mode": "fuzzy"}, "Invalid arguments for search_output: mode"),
    ("read_output", {"lines": "5:3"}, "5:3"),
    ("read_output", {"execution": 99}, "no execution 99"),
    ("search_output", {"query": "(", "mode": "regex"}, "regular expression"),
    ("status", {"kernel": "no-such-kernel"}, "no kernel named 'no-such-kernel'"),
    ("wait", {"execution": 42}, "no execution 42"),
]


async def test_errors_are_one_sentence(connect_client: Any) -> None:
    async with conversation(connect_client) as mcp:
        await run(mcp, "print('x')")
        for tool, arguments, fragment in ERRORS:
            result = await mcp.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            message = text(result)
            assert fragment in message, (tool, message)
            assert "Traceback" not in message and "\n" not in message


async def test_unreachable_gateway_is_a_clear_error(
    connect_client: Any, settings: Settings
) -> None:
    nowhere = Settings(**{**settings.__dict__, "gateway": "http://127.0.0.1:1"})
    async with connect_client(settings=nowhere) as mcp:
        result = await run(mcp, "1")
        assert result.is_error
        assert "cannot reach the gateway at http://127.0.0.1:1" in text(result)
        assert settings.env["LOOMGATE_TOKEN"] not in text(result)


async def test_wait_until_silent_returns_early(connect_client: Any, gate: Gate) -> None:
    async with conversation(connect_client) as mcp:
        code = f"print('burst', flush=True)\n{gate.wait}"
        await run(mcp, code, wait_seconds=0.5)
        quiet = await mcp.call_tool("wait", {"wait_seconds": 60, "until_silent_seconds": 1})
        assert quiet.structured_content["returned"] == "silent"
        assert quiet.structured_content["state"] == "running"
        assert text(quiet).split("\n")[1:3] == ["Last lines:", "burst"]
        gate.open()
        done = await mcp.call_tool("wait", {"wait_seconds": 60})
        assert done.structured_content["state"] == "completed"


async def test_cancelled_call_never_stops_the_cell(connect_client: Any, gate: Gate) -> None:
    async with conversation(connect_client) as mcp:
        await run(mcp, "pass")
        code = f"{gate.wait}\nprint('survived')"
        with anyio.move_on_after(0.5) as cancelled:
            await run(mcp, code, wait_seconds=30)
        assert cancelled.cancelled_caught
        still = await mcp.call_tool("status", {"execution": 2})
        assert still.structured_content["state"] == "running", text(still)
        gate.open()
        done = await mcp.call_tool("wait", {"execution": 2, "wait_seconds": 60})
        assert done.structured_content["state"] == "completed"
        assert text(done).endswith("survived")


async def test_wrong_token_is_a_clear_error(connect_client: Any, settings: Settings) -> None:
    wrong = Settings(**{**settings.__dict__, "env": {"LOOMGATE_TOKEN": "not-the-token"}})
    async with connect_client(settings=wrong) as mcp:
        result = await run(mcp, "1")
        assert result.is_error
        assert "refused the token" in text(result)
        assert "not-the-token" not in text(result)


async def test_kernel_option_attaches_and_conversation_kernel_is_released(
    connect_client: Any, settings: Settings, gateway: Any
) -> None:
    async with connect_client() as mcp:
        first = await run(mcp, "kept = 'yes'")
        kernel = first.structured_content["kernel"]
        status = await mcp.call_tool("status", {})
        assert status.structured_content["kernel"]["lifetime"] == "conversation"
    async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers) as http:
        model = (await http.get(f"/api/loomgate/kernels/{kernel}")).json()["kernel"]
        assert model["alive"] and model["holders"] == 0  # released: its grace period runs
    attached = Settings(**{**settings.__dict__, "kernel": kernel[:8]})
    async with conversation(lambda: connect_client(settings=attached)) as mcp:
        again = await run(mcp, "kept")
        assert text(again).endswith("Out[2]: 'yes'")


async def test_kernel_option_naming_no_kernel_starts_one(
    connect_client: Any, settings: Settings
) -> None:
    name = f"started-by-option-{uuid.uuid4().hex[:6]}"
    named = Settings(**{**settings.__dict__, "kernel": name})
    async with connect_client(settings=named) as mcp:
        first = await run(mcp, "1")
        assert text(first).split("\n")[0] == (
            f"Started a persistent kernel named {name}: --kernel named no running kernel."
        )
        assert first.structured_content["execution"] == 1
        stopped = first.structured_content["kernel"][:8]
        await mcp.call_tool("stop_kernel", {"kernel": name})
    async with connect_client(settings=named) as mcp:  # the name now goes to a new kernel
        again = await run(mcp, "2")
        assert (
            text(again)
            .split("\n")[0]
            .startswith(
                f"The earlier kernel named {name} ({stopped}) was stopped; its 1 execution stays"
            )
        )
        assert again.structured_content["execution"] == 1
        await mcp.call_tool("stop_kernel", {"kernel": name})


async def test_conversation_kernel_starts_in_the_translators_cwd(
    connect_client: Any, settings: Settings
) -> None:
    async with conversation(connect_client) as mcp:
        result = await run(mcp, "import os; os.getcwd()")
        assert text(result).endswith(f"Out[1]: {settings.cwd!r}")


async def test_unknown_gateway_name_is_a_clear_error(connect_client: Any, config_dir: Path) -> None:
    (config_dir / "gateways.toml").write_text(
        '[gateways.lab]\nurl = "http://127.0.0.1:1"\ntoken_env = "LAB_TOKEN"\n'
    )
    async with conversation(connect_client) as mcp:
        result = await mcp.call_tool("list_kernels", {"gateway": "labb"})
        assert result.is_error
        assert text(result) == (
            f"unknown gateway 'labb'; {config_dir / 'gateways.toml'} defines: lab"
        )
