"""Bad input: thousands of generated tool calls, and cells that print hostile output."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.cells import PNG_BYTES
from tests.support.figures import Figure, scaled
from tests.support.gateways import GatewayProcess
from tests.support.mcp_clients import stop_conversation_kernel, text

CALLS = scaled(2000)
CALL_TIMEOUT = 60.0
SEED = 20261130
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

TEXTS: list[Any] = [
    "",
    " ",
    "\x00",
    "nul\x00inside",
    "é漢字🙂",
    "\u202eevil",
    "\ud800",
    "x" * 100_000,
    "../../etc/passwd",
    "%s%n{0}",
    "'; DROP TABLE records; --",
    "\n\n\n",
]
NUMBERS: list[Any] = [0, 1, -1, 7, 2**31, 2**63, 10**30, -(10**30), 0.5, -2.5, 1e308, -1e308]
OTHERS: list[Any] = [None, True, False, [], {}, [1, 2], {"a": 1}]
RANGES = [
    ":",
    "1:",
    ":-1",
    "-5:",
    "5:2",
    "a:b",
    "1:2:3",
    "--1:",
    "0:0",
    "-99999999999:",
    "1e9:",
    " 1 : 2 ",
    "١:٣",
    "∞:",
    "9223372036854775808:9223372036854775809",
]
REGEXES = ["(a+)+$", "(a|aa)+$", "(.*a){25}", "[", "(?P<x", "\\", "a{99999999}", "(?i)ÀÉ"]
UNKNOWN_KERNELS = ["no-such-kernel", "", " ", "\x00", "é", "x" * 5000, "../..", "zzzz-zz"]
CODES = [
    "1 + 1",
    "",
    "   ",
    "def",
    "\x00",
    "'é漢字🙂'",
    "print('\\x00 nul')",
    "x" * 100_000,
    "import sys; sys.stdout.write('no newline')",
    "raise SystemExit(3)",
]
MANY = TEXTS + NUMBERS + OTHERS


def bad_names(rng: random.Random) -> Any:
    """Return a kernel reference that cannot create or match a kernel."""
    value = rng.choice(UNKNOWN_KERNELS + NUMBERS + OTHERS[1:])
    if isinstance(value, str) and NAME.match(value):
        return "bad name!"
    return value


def some(rng: random.Random, pool: list[Any]) -> Any:
    """Return a value of `pool` most of the time, else anything at all."""
    return rng.choice(pool) if rng.random() < 0.7 else rng.choice(MANY)


def generated_call(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """Return one tool call with hostile arguments (never one that starts or stops a kernel)."""
    tool = rng.choice(
        [
            "read_output",
            "search_output",
            "status",
            "wait",
            "interrupt",
            "send_input",
            "run_cell",
            "connect",
            "list_kernels",
            "stop_kernel",
            "reset",
        ]
    )
    args: dict[str, Any] = {}

    def execution() -> Any:
        return some(rng, [1, 2, 3, 0, -1, 10**9, "all", "1"])

    if tool == "read_output":
        args = {
            "execution": execution(),
            "lines": some(rng, RANGES),
            "max_chars": some(rng, NUMBERS),
            "stream": some(rng, ["combined", "stdout", "nope", "STDOUT"]),
        }
    elif tool == "search_output":
        args = {
            "query": some(rng, REGEXES + TEXTS),
            "execution": execution(),
            "mode": some(rng, ["auto", "literal", "regex", "glob"]),
            "context": some(rng, NUMBERS),
            "max_matches": some(rng, NUMBERS),
            "ignore_case": some(rng, OTHERS),
        }
    elif tool in ("status", "interrupt"):
        args = {"execution": execution()} if tool == "status" else {}
    elif tool == "wait":
        args = {
            "execution": execution(),
            "wait_seconds": some(rng, [0, 0.1, -1, 1e308]),
            "until_silent_seconds": some(rng, [0, 0.1, -3]),
        }
    elif tool == "send_input":
        args = {"value": some(rng, TEXTS), "execution": execution()}
    elif tool == "run_cell":
        args = {
            "code": some(rng, CODES),
            "wait_seconds": some(rng, [0, 5, 30, -1, 1e9, "soon"]),
            "full_output": some(rng, OTHERS),
        }
    elif tool == "connect":
        args = {"kernel": bad_names(rng), "gateway": some(rng, ["nowhere", "http://127.0.0.1:9"])}
    elif tool == "list_kernels":
        args = {"gateway": some(rng, ["nowhere", "http://127.0.0.1:9", "ftp://x", None])}
    elif tool in ("stop_kernel", "reset"):
        args = {"kernel": bad_names(rng)}
    if tool not in ("connect", "list_kernels", "stop_kernel", "reset") and rng.random() < 0.3:
        args["kernel"] = bad_names(rng)
    if rng.random() < 0.1:
        args[rng.choice(["bogus", "\x00", "é"])] = rng.choice(MANY)
    if rng.random() < 0.2:
        args.pop(rng.choice(list(args) or ["none"]), None)
    return tool, args


@pytest.fixture(scope="module")
def own_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway for this module alone: fuzzed kernel references cannot reach other tests."""
    process = GatewayProcess(tmp_path_factory.mktemp("fuzz") / "state").start()
    try:
        yield process
    finally:
        process.stop()


@contextlib.asynccontextmanager
async def translator(own_gateway: GatewayProcess, tmp_path: Path) -> AsyncIterator[Client]:
    """A translator on the module's gateway; its conversation kernel is stopped afterwards."""
    settings = Settings(
        gateway=own_gateway.url,
        autostart=False,
        cwd=str(tmp_path),
        env={"LOOMGATE_TOKEN": own_gateway.token},
    )
    async with Client(build_server(settings)) as client:
        try:
            yield client
        finally:
            await stop_conversation_kernel(client)


# How each tool's valid reply begins: a result must be that tool's kind of answer.
CELL = r"In \[\d+\] (\(.*\):|is still running|is waiting for )"
VALID_REPLY = {
    "run_cell": CELL,
    "wait": CELL,
    "send_input": CELL,
    "interrupt": CELL,
    "read_output": r"In \[\d+\] \w+( is empty\.|, lines [\d,]+–[\d,]+ of | has [\d,]+ lines)",
    "search_output": r"(No lines match .*\.|\d+ match(es)? for .*:)",
    "status": r"(Kernel \S+ \[[0-9a-f]{8}\] on |In \[\d+\]: \w+, elapsed )",
    "list_kernels": r"(Kernels on .*:|No kernels on .*\.)",
    "connect": r"(Created|Connected to) kernel \S+ on ",
    "reset": r"Kernel \S+ was reset: its variables are gone; records and numbering are kept\.",
    "stop_kernel": r"Stopped kernel \S+; its records stay readable\.",
}


def check_reply(result: Any, token: str, call: tuple[str, dict[str, Any]]) -> str:
    """Assert that `result` is a clear error or a valid result; return "error" or "result"."""
    reply = text(result)
    where = f"{call[0]}({str(call[1])[:300]}) → {reply[:300]}"
    assert token not in reply and "failed unexpectedly" not in reply, where
    if result.is_error:
        assert reply and len(reply) <= 1000 and reply.count("\n") <= 2, where
        assert "Traceback" not in reply, where
        return "error"
    assert re.match(VALID_REPLY[call[0]], reply.split("\n", 1)[0]), where
    assert result.structured_content is not None, where
    return "result"


async def test_generated_tool_calls(
    own_gateway: GatewayProcess, tmp_path: Path, figure: Figure
) -> None:
    async with translator(own_gateway, tmp_path) as mcp:
        await generated_calls(own_gateway, mcp, figure)


async def generated_calls(own_gateway: GatewayProcess, mcp: Client, figure: Figure) -> None:
    """Send CALLS generated calls through `mcp`, checking each reply and the gateway after."""
    setup = "for i in range(3): print('a' * 20000 + '!')\nprint('é漢字🙂\\x00 tail')"
    prepared = await mcp.call_tool("run_cell", {"code": setup, "wait_seconds": 60})
    assert not prepared.is_error, text(prepared)
    rng = random.Random(SEED)
    outcomes: Counter[str] = Counter()
    slowest = 0.0
    for _ in range(CALLS):
        call = generated_call(rng)
        began = time.monotonic()
        result = await asyncio.wait_for(mcp.call_tool(*call), CALL_TIMEOUT)
        took = time.monotonic() - began
        if took > 1:
            print(f"slow: {took:.1f} s {call[0]} {str(call[1])[:200]}")
        slowest = max(slowest, took)
        outcomes[check_reply(result, own_gateway.token, call)] += 1
    for regex in REGEXES[:3]:  # catastrophic patterns on 20,000-character lines
        found = await asyncio.wait_for(
            mcp.call_tool("search_output", {"query": regex, "mode": "regex", "execution": 1}),
            CALL_TIMEOUT,
        )
        outcomes[check_reply(found, own_gateway.token, ("search_output", {"query": regex}))] += 1
    after = await mcp.call_tool("run_cell", {"code": "6 * 7"})
    assert text(after).endswith(": 42"), text(after)
    async with httpx.AsyncClient(base_url=own_gateway.url, headers=own_gateway.headers) as http:
        assert (await http.get("/api/loomgate/info")).status_code == 200
    figure(
        scenario="bad input: generated tool calls",
        checked="every reply is a one-to-three-line error or a valid result; no traceback, no "
        "token; catastrophic regexes end; the gateway and kernel serve afterwards",
        calls=sum(outcomes.values()),
        errors=outcomes["error"],
        results=outcomes["result"],
        slowest_call_seconds=round(slowest, 2),
    )


# What reading the stored output back must show: (read_output arguments, expected text).
# A read of what each hostile cell stored, text it must show, and text a search must find.
STORED = {
    "binary garbage": ({"lines": "1:"}, "0123456789:;<=>?@ABC", "0123456789:;<=>?@ABC"),
    "invalid UTF-8": ({"lines": "1:"}, "lone surrogates", "lone surrogates"),
    "10 MB single line": ({"lines": "1:1", "max_chars": 10}, "1│yyyyyyyyyy", "yyyyyyyyyy"),
    "1,000 images": ({"lines": "-1:"}, "1000│", "Image object"),
}
HOSTILE_CELLS = {
    "binary garbage": "import os\nos.write(1, bytes(range(256)) * 64 + b'\\n')\n"
    "print(bytes(range(256)).decode('latin-1'))",
    "invalid UTF-8": "import os\nos.write(1, b'\\xff\\xfe\\xc3\\x28 bad \\xed\\xa0\\x80\\n')\n"
    "print(b'\\xff\\xfe lone surrogates'.decode('utf-8', 'surrogateescape'))",
    "10 MB single line": "print('y' * 10_000_000)",
    "1,000 images": "from IPython.display import Image, display\n"
    f"png = {PNG_BYTES!r}\nfor i in range(1000): display(Image(data=png))",
}


@pytest.mark.parametrize("kind", list(HOSTILE_CELLS))
async def test_hostile_output(
    own_gateway: GatewayProcess, tmp_path: Path, kind: str, figure: Figure
) -> None:
    async with translator(own_gateway, tmp_path) as mcp:
        await hostile_output(mcp, kind, figure)


async def hostile_output(mcp: Client, kind: str, figure: Figure) -> None:
    """Run one hostile cell through `mcp`; check the reply, reads, searches, the next cell."""
    began = time.monotonic()
    result = await asyncio.wait_for(
        mcp.call_tool("run_cell", {"code": HOSTILE_CELLS[kind], "wait_seconds": 120}),
        CALL_TIMEOUT * 2,
    )
    reply = text(result)
    assert not result.is_error, reply[:500]
    assert result.structured_content["state"] == "completed", reply[:500]
    assert len(reply) <= 40_000, "the model gets head and tail, not everything"
    images = [block for block in result.content if block.type == "image"]
    assert len(images) <= 20
    status = await mcp.call_tool("status", {})
    assert not status.is_error, text(status)
    arguments, expected, query = STORED[kind]
    read = await mcp.call_tool("read_output", arguments)
    assert not read.is_error and expected in text(read), text(read)[:500]
    found = await mcp.call_tool(
        "search_output", {"query": query, "mode": "literal", "max_matches": 1}
    )
    assert found.structured_content["matches"] == 1, text(found)[:500]
    assert query in found.structured_content["groups"][0]["lines"][0]
    after = await mcp.call_tool("run_cell", {"code": "'still fine'"})
    assert text(after).endswith("'still fine'"), text(after)
    figure(
        scenario=f"bad input: a cell printing {kind}",
        checked="the cell completes; the reply is bounded (head and tail, ≤ 20 images); "
        "reading, searching and the next cell work",
        reply_chars=len(reply),
        images_in_reply=len(images),
        seconds=round(time.monotonic() - began, 1),
    )
