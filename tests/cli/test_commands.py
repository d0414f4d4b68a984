"""The person's CLI as a real subprocess against a real gateway."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.gateways import GatewayProcess, child_pids, free_port, wait_gone

LOOMGATE = [sys.executable, "-m", "loomgate.translator.commands"]


def cli_env(gateway: GatewayProcess, tmp_path: Path) -> dict[str, str]:
    """Return the environment of a CLI process talking to `gateway`."""
    return {
        **os.environ,
        "LOOMGATE_URL": gateway.url,
        "LOOMGATE_TOKEN": gateway.token,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }


async def loomgate(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> tuple[int, str, str]:
    """Run `loomgate ARGS`; return exit status, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        *LOOMGATE,
        *args,
        env=env,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(
        process.communicate(stdin.encode() if stdin is not None else None), 120
    )
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_state_across_runs_and_exit_codes(gateway: GatewayProcess, tmp_path: Path) -> None:
    env = cli_env(gateway, tmp_path)
    try:
        assert (await loomgate(env, "run", "x = 1"))[0] == 0
        status, out, _ = await loomgate(env, "run", "x + 1")
        assert status == 0 and out.strip().endswith("Out[2]: 2")
        status, out, _ = await loomgate(env, "run", "-", stdin="print('from stdin')\n")
        assert status == 0 and out.strip() == "from stdin"
        status, out, _ = await loomgate(env, "run", "1/0")
        assert status == 1 and "ZeroDivisionError" in out
        status, out, _ = await loomgate(env, "run", "--json", "6 * 7")
        record = json.loads(out)
        assert record["execution"]["state"] == "completed"
        assert [line["text"] for line in record["lines"]] == ["42"]
        status, out, _ = await loomgate(env, "kernels", "--json")
        assert any(k["name"] == "default" for k in json.loads(out))
    finally:
        await loomgate(env, "stop", "default")


async def test_usage_and_connection_errors_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "LOOMGATE_URL": "http://127.0.0.1:1", "LOOMGATE_TOKEN": "x"}
    status, _, err = await loomgate(env, "run", "1")
    assert status == 2 and "cannot reach the gateway at http://127.0.0.1:1" in err
    status, _, err = await loomgate(env, "run")
    assert status == 2


async def test_output_streams_live_and_ctrl_c_interrupts(
    gateway: GatewayProcess, tmp_path: Path, live_kernel: str
) -> None:
    env = cli_env(gateway, tmp_path)
    code = "import time\nprint('first', flush=True)\ntime.sleep(60)\nprint('never')"
    process = await asyncio.create_subprocess_exec(
        *LOOMGATE,
        "run",
        "--kernel",
        live_kernel,
        code,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    status, out, _ = await live_then_interrupt(process)
    assert out.startswith("first\n")
    assert "KeyboardInterrupt" in out and "never" not in out.split("\n")
    assert "[interrupted after" in out
    assert status == 1


async def live_then_interrupt(process: asyncio.subprocess.Process) -> tuple[int, str, str]:
    """Read the first line while the cell runs, then press Ctrl-C; return status and output."""
    assert process.stdout is not None and process.stderr is not None
    first = await asyncio.wait_for(process.stdout.readline(), 60)
    assert process.returncode is None  # the line arrived while the cell still runs
    process.send_signal(signal.SIGINT)
    rest, err = await asyncio.wait_for(
        asyncio.gather(process.stdout.read(), process.stderr.read()), 60
    )
    await process.wait()
    return process.returncode or 0, (first + rest).decode(), err.decode()


@pytest.fixture
async def live_kernel(http: httpx.AsyncClient) -> AsyncIterator[str]:
    """A persistent kernel for the CLI to use (stopped afterwards); yields its name."""
    await http.post("/api/loomgate/kernels", json={"name": "cli-live"})
    try:
        yield "cli-live"
    finally:
        await http.delete("/api/loomgate/kernels/cli-live")


async def test_gateway_start_status_stop(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "LOOMGATE_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    status, out, err = await loomgate(env, "gateway", "start", "--port", str(port))
    assert status == 0, err
    info = json.loads((tmp_path / "state" / "gateway.json").read_text())
    try:
        status, out, _ = await loomgate(env, "gateway", "status")
        assert status == 0 and f"pid: {info['pid']}" in out and str(port) in out
        status, out, _ = await loomgate(env, "run", "print('via daemon')")
        assert out.strip() == "via daemon"
        status, out, _ = await loomgate(env, "gateway", "logs")
        assert status == 0 and info["token"] not in out
        kernels = child_pids(info["pid"])
        assert kernels, "the daemon should be running the default kernel"
    finally:
        status, out, _ = await loomgate(env, "gateway", "stop")
    assert status == 0
    assert wait_gone({info["pid"], *kernels}, 30) == set()
    status, out, _ = await loomgate(env, "gateway", "status")
    assert status == 1
