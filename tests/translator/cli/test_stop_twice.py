"""`loomgate stop NAME` on a kernel already stopped: a clear sentence (when it stopped, its
records still readable), and the gateway's log holds one WARNING line, no ERROR nor headers."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from tests.support.gateways import GatewayProcess

LOOMGATE = [sys.executable, "-m", "loomgate.translator.cli"]


async def loomgate(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """Run `loomgate ARGS`; return exit status, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        *LOOMGATE,
        *args,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_stopping_a_stopped_kernel_says_so(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    fresh_gateway.extra_args = ["--log-level", "INFO"]  # as a person's gateway runs
    fresh_gateway.start()
    env = {
        **os.environ,
        "LOOMGATE_URL": fresh_gateway.url,
        "LOOMGATE_TOKEN": fresh_gateway.token,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    assert (await loomgate(env, "run", "--kernel", "twice", "1"))[0] == 0
    assert await loomgate(env, "stop", "twice") == (0, "stopped twice\n", "")

    status, out, err = await loomgate(env, "stop", "twice")
    assert status != 0 and out == ""
    assert re.fullmatch(
        r"loomgate: no kernel named twice \(stopped \d+ s ago; its records are still "
        r"readable\)\n",
        err,
    ), err

    log = (fresh_gateway.state_dir / "gateway.log").read_text()
    assert " ERROR " not in log, log
    assert '"Host"' not in log  # jupyter_server's header dump of a 5xx
    [line] = [x for x in log.splitlines() if "DELETE /api/loomgate/kernels/twice" in x]
    assert " WARNING " in line and "503" in line and "(unavailable)" in line, line
