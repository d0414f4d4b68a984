"""The gateway keeps no output in memory: its peak does not follow what a cell writes."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.gateways import GatewayProcess

API = "/api/loomgate/kernels"
TOTAL_MB = 240
# A record that kept its output would grow by TOTAL_MB; one message (1 MB), the gateway's own
# working set and what a loaded machine leaves queued for it (43 MB seen) fit well below this.
BOUND_MB = TOTAL_MB / 3


def peak_kb(pid: int) -> int:
    """Return the peak resident memory of process `pid` so far (VmHWM), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise LookupError(f"no VmHWM for {pid}")


async def test_gateway_memory_does_not_follow_total_output(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.start()
    assert fresh_gateway.proc is not None
    pid = fresh_gateway.proc.pid
    async with httpx.AsyncClient(
        base_url=fresh_gateway.url, headers=fresh_gateway.headers, timeout=300
    ) as http:
        r = await http.post(API, json={"name": "loud"})
        kernel = r.json()["kernel"]["id"]
        await http.post(f"{API}/{kernel}/executions", json={"code": "1", "wait": 60})
        before = peak_kb(pid)
        # 1 MB messages at about a third of the rate the gateway stores them, so none wait in
        # ZMQ's queue: a kernel writing faster than that makes the queue, not the records, grow.
        code = (
            "import sys, time\n"
            "megabyte = ('x' * 1023 + '\\n') * 1024\n"
            f"for _ in range({TOTAL_MB}):\n"
            "    sys.stdout.write(megabyte)\n"
            "    sys.stdout.flush()\n"
            "    time.sleep(0.03)\n"
        )
        r = await http.post(f"{API}/{kernel}/executions", json={"code": code, "wait": 280})
        execution = r.json()["execution"]
        assert execution["state"] == "completed", execution
        assert execution["streams"]["stdout"]["lines"] == TOTAL_MB * 1024
        grown_mb = (peak_kb(pid) - before) / 1024
        assert grown_mb < BOUND_MB, f"the gateway's peak grew {grown_mb:.0f} MB"
