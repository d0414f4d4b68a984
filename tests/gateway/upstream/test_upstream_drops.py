"""An ipykernel on an upstream is not told to keep every IOPub message (only a local one is):
when the upstream stops reading, the kernel's publisher drops a run of its numbered messages,
and the record marks it rather than lose it unseen."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from tests.gateway.upstream.test_upstream_mode import API, ended
from tests.support.cells import run
from tests.support.gates import Gate
from tests.support.gateways import client
from tests.support.sse import events, next_event
from tests.support.upstreams import running, upstream_gateway

MESSAGES = 20_000  # a flushed line each: far above ZMQ's 1,000 queued by default
PRINTED_TIMEOUT = 60.0


async def printed(flag: Path) -> None:
    """Return once the cell has written `flag` after its last line. The upstream is stopped:
    no event can say so, the file is polled."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PRINTED_TIMEOUT
    while not await asyncio.to_thread(flag.exists):
        assert loop.time() < deadline, "the cell did not finish printing"
        await asyncio.sleep(0.05)


async def test_a_run_an_upstream_ipykernel_dropped_is_marked_in_its_record(
    tmp_path: Path,
) -> None:
    gate, flag = Gate(tmp_path), tmp_path / "printed"
    code = (
        f"print('before', flush=True)\n{gate.wait}\n"
        f"for i in range({MESSAGES}): print(i, flush=True)\n"
        f"open({str(flag)!r}, 'w').close()"
    )
    # No IOPub rate limit: what it would hold back would hide what the kernel drops.
    unlimited = ("--ZMQChannelsWebsocketConnection.limit_rate=False",)
    with running(tmp_path / "upstream", "jupyter_server", extra_args=unlimited) as upstream:
        gateway = upstream_gateway(tmp_path / "state", upstream.url, upstream.token)
        try:
            await asyncio.to_thread(gateway.start)
            async with client(gateway) as http:
                r = await http.post(f"{API}/kernels", json={})
                assert r.status_code == 201, r.text
                kernel = r.json()["kernel"]["id"]
                async with events(http, kernel) as stream:
                    cell = await run(http, kernel, code, wait=0)
                    await next_event(stream, "output", number=cell["number"])
                    assert upstream.process is not None
                    os.kill(upstream.process.pid, signal.SIGSTOP)  # it reads nothing meanwhile
                    try:
                        gate.open()
                        await printed(flag)
                    finally:
                        os.kill(upstream.process.pid, signal.SIGCONT)
                    await ended(stream, cell["number"], "completed")
                r = await http.get(f"{API}/kernels/{kernel}/executions/{cell['number']}")
                record = r.json()["execution"]
                dropped = [gap for gap in record["gaps"] if gap.get("by") == "kernel"]
                assert dropped and all(gap["dropped"] > 0 for gap in dropped), record["gaps"]
                assert record["streams"]["stdout"]["lines"] < MESSAGES + 1
                await http.delete(f"{API}/kernels/{kernel}")
        finally:
            await asyncio.to_thread(gateway.stop)
