"""A kernel's IOPub faster than the gateway reads it, and a gateway that could not read it for a
while (stopped): no message dropped, and a cell whose end a kernel dropped all the same still
ends (kernels under the default profile, as people run them)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import httpx

from loomgate.gateway.kernels.missed_end import MISSED_END
from tests.support.contention import slowed
from tests.support.gateways import GatewayProcess, client

API = "/api/loomgate/kernels"
LINES = 20_000
FLOOD = f"for i in range({LINES}):\n    print(i, flush=True)"  # one IOPub message per line
# A cell that floods once the test has stopped the gateway.
FLOOD_WHEN_TOLD = f"import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.01)\n{FLOOD}"
# The kernel leaves a file once it has handed the idle after that cell to ZMQ (its IOPub thread
# writes it next): the test's sign that the cell's end was published, or dropped.
IDLE_TOLD = (
    "import os\n"
    "kernel = get_ipython().kernel\n"
    "publish = kernel._publish_status\n"
    "def told(status, channel, parent=None):\n"
    "    publish(status, channel, parent)\n"
    "    if status == 'idle' and os.path.exists('go'):\n"
    "        kernel.iopub_thread.schedule(lambda: open('ended', 'w').close())\n"
    "kernel._publish_status = told"
)
# ZMQ's default limit back on the kernel's IOPub socket, set on its own thread.
DROPPING = (
    "import zmq\n"
    "thread = get_ipython().kernel.iopub_thread\n"
    "thread.io_loop.add_callback(thread.socket.setsockopt, zmq.SNDHWM, 1000)"
)


async def new_kernel(http: httpx.AsyncClient) -> str:
    """Start a kernel of the gateway's default profile; return its id."""
    r = await http.post(API, json={})
    assert r.status_code == 201, r.text
    return str(r.json()["kernel"]["id"])


async def test_a_flood_of_messages_loses_none(confined_gateway: GatewayProcess) -> None:
    # With ZMQ's default high-water mark, a gateway on a busy CPU lost over a third of these
    # (bench/results/iopub.md), and at times the cell's idle: then the cell never ended.
    gateway = confined_gateway.start()
    async with client(gateway) as http:
        kernel = await new_kernel(http)
        assert gateway.proc is not None
        with slowed(gateway.proc.pid):
            r = await http.post(f"{API}/{kernel}/executions", json={"code": FLOOD, "wait": 120})
        execution = r.json()["execution"]
        assert execution["state"] == "completed", execution
        assert execution["streams"]["stdout"]["lines"] == LINES
        assert execution["note"] is None
        r = await http.get(
            f"{API}/{kernel}/executions/{execution['number']}/streams/stdout",
            params={"lines": "-2:"},
        )
        assert [line["text"] for line in r.json()["lines"]] == [f"{LINES - 2}", f"{LINES - 1}"]


async def test_a_kernels_iopub_queues_what_is_not_read_yet(
    confined_gateway: GatewayProcess,
) -> None:
    # Read back where iopub_queue.py set it: this fails when ipykernel's internals it uses move.
    gateway = confined_gateway.start()
    async with client(gateway) as http:
        kernel = await new_kernel(http)
        code = "import zmq\nget_ipython().kernel.iopub_thread.socket.getsockopt(zmq.SNDHWM)"
        cell = {"code": code, "wait": 30, "head": 1}
        r = await http.post(f"{API}/{kernel}/executions", json=cell)
        execution = r.json()["execution"]
        assert execution["state"] == "completed", execution
        assert [line["text"] for line in execution["output"]["head"]] == ["0"]


async def flooded_while_stopped(
    gateway: GatewayProcess, http: httpx.AsyncClient, kernel: str, project: Path
) -> dict[str, Any]:
    """Run a cell that floods and ends while `gateway` is stopped; return its execution, read
    once the gateway runs again."""
    r = await http.post(f"{API}/{kernel}/executions", json={"code": IDLE_TOLD, "wait": 30})
    assert r.json()["execution"]["state"] == "completed", r.text
    r = await http.post(f"{API}/{kernel}/executions", json={"code": FLOOD_WHEN_TOLD})
    number = r.json()["execution"]["number"]
    assert gateway.proc is not None
    gateway.proc.send_signal(signal.SIGSTOP)
    try:
        (project / "go").touch()
        deadline = time.monotonic() + 60
        while not (project / "ended").exists():  # the kernel's own sign: no event reaches here
            assert time.monotonic() < deadline, "the cell's end was not published"
            await asyncio.sleep(0.05)
    finally:
        gateway.proc.send_signal(signal.SIGCONT)
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30})
    execution: dict[str, Any] = r.json()["execution"]
    r = await http.post(f"{API}/{kernel}/executions", json={"code": "6 * 7", "wait": 30})
    assert r.status_code == 201, r.text
    assert r.json()["execution"]["state"] == "completed"
    return execution


async def test_a_cell_ending_while_the_gateway_is_stopped_loses_nothing(
    confined_gateway: GatewayProcess, confined_root: Path
) -> None:
    gateway = confined_gateway.start()
    async with client(gateway) as http:
        kernel = await new_kernel(http)
        execution = await flooded_while_stopped(gateway, http, kernel, confined_root / "project")
        assert execution["state"] == "completed", execution
        assert execution["streams"]["stdout"]["lines"] == LINES  # the kernel kept them
        assert execution["note"] is None


async def test_a_cell_whose_end_the_kernel_dropped_ends_by_its_reply(
    confined_gateway: GatewayProcess, confined_root: Path
) -> None:
    # A kernel whose IOPub drops what a stopped gateway cannot take (as any but ipykernel may).
    gateway = confined_gateway.start()
    async with client(gateway) as http:
        kernel = await new_kernel(http)
        r = await http.post(f"{API}/{kernel}/executions", json={"code": DROPPING, "wait": 30})
        assert r.json()["execution"]["state"] == "completed", r.text
        execution = await flooded_while_stopped(gateway, http, kernel, confined_root / "project")
        assert execution["state"] == "completed", execution
        # The kernel dropped what its queue could not hold: its idle among it, here.
        assert execution["streams"]["stdout"]["lines"] < LINES
        assert execution["note"] == MISSED_END
