"""`loomgate gateway stop` as a person runs it (the real CLI, a real gateway): it stops the gateway
after a kernel's start was refused by its sandbox, and `gateway.json` stays until the gateway
has let go of its port and kernels, so `gateway status` never says that none runs meanwhile."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from loomgate.shared.paths import GATEWAY_FILE, read_gateway_file
from tests.support.cells import KERNELS, run
from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess, client, wait_gone, wait_refused

LOOMGATE = [sys.executable, "-m", "loomgate.translator.cli"]
STOPPED = 30.0  # seconds a stop may take here (the CLI itself gives up after 60)


def cli_env(gateway: GatewayProcess) -> dict[str, str]:
    """Return the environment of a person's `loomgate` whose local gateway is `gateway`."""
    env = {**os.environ, "LOOMGATE_STATE_DIR": str(gateway.state_dir)}
    for name in ("LOOMGATE_URL", "LOOMGATE_TOKEN"):
        env.pop(name, None)
    return env


async def loomgate(env: dict[str, str], *args: str) -> asyncio.subprocess.Process:
    """Start `loomgate ARGS` (its output piped)."""
    return await asyncio.create_subprocess_exec(
        *LOOMGATE,
        *args,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finished(process: asyncio.subprocess.Process) -> tuple[int, str, str]:
    """Return a `loomgate` run's exit status, stdout and stderr once it ends."""
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_gateway_stop_stops_it_after_a_start_its_sandbox_refused(
    fresh_gateway: GatewayProcess,
) -> None:
    # bubblewrap demanded, and none on PATH: a confined kernel's start is refused.
    fresh_gateway.env |= {
        "LOOMGATE_SANDBOX_MECHANISM": "bubblewrap",
        "PATH": str(Path(sys.executable).parent),
    }
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        for _ in range(2):
            refused = await http.post(KERNELS, json={"sandbox": "workspace"})
            assert refused.status_code == 503, refused.text
            assert "no bubblewrap on PATH" in refused.json()["message"]
        for _ in range(2):
            started = await http.post(KERNELS, json={"sandbox": "none"})
            assert started.status_code == 201, started.text
    kernels = fresh_gateway.kernel_pids()
    assert kernels
    assert fresh_gateway.proc is not None

    status, out, err = await finished(await loomgate(cli_env(fresh_gateway), "gateway", "stop"))

    assert (status, err) == (0, ""), (out, err)
    assert out == f"stopped the gateway at {fresh_gateway.url} (its kernels are shut down)\n"
    assert fresh_gateway.proc.wait(STOPPED) == 0
    assert not wait_gone(kernels, STOPPED), "a kernel outlived `gateway stop`"
    assert not (fresh_gateway.state_dir / GATEWAY_FILE).exists()
    log = (fresh_gateway.state_dir / "gateway.log").read_text()
    assert "Kernel does not exist" not in log, log[-3000:]
    assert "did not shut down" not in log and "Not every kernel" not in log, log[-3000:]


async def test_gateway_json_stays_until_the_gateway_has_let_go(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    fresh_gateway.start()
    assert fresh_gateway.proc is not None
    exiting, gate = tmp_path / "exiting", Gate(tmp_path)
    async with client(fresh_gateway) as http:
        created = await http.post(KERNELS, json={"name": "slow-to-end"})
        kernel = created.json()["kernel"]["id"]
        # Its process, once asked to end, says so and then waits for the gate.
        code = (
            "import atexit\n"
            "def ending():\n"
            f"    open({str(exiting)!r}, 'w').close()\n"
            f"    {gate.wait}\n"
            "atexit.register(ending)"
        )
        assert (await run(http, kernel, code))["state"] == "completed"
    env = cli_env(fresh_gateway)
    stopping = await loomgate(env, "gateway", "stop")
    try:
        while not exiting.exists():  # the gateway is shutting its kernel down now
            assert stopping.returncode is None and fresh_gateway.proc.poll() is None
            await asyncio.sleep(0.02)
        named = read_gateway_file(fresh_gateway.state_dir)
        assert named is not None and named["pid"] == fresh_gateway.proc.pid
        status, out, err = await finished(await loomgate(env, "gateway", "status"))
        assert (status, err) == (1, ""), (out, err)
        assert out == f"the gateway (pid {named['pid']}) is stopping: it no longer answers\n"
    finally:
        gate.open()
    status, out, err = await finished(stopping)
    assert (status, err) == (0, ""), (out, err)
    assert fresh_gateway.proc.wait(STOPPED) == 0
    assert not (fresh_gateway.state_dir / GATEWAY_FILE).exists()
    wait_refused(fresh_gateway.url)
