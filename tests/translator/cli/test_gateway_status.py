"""`loomgate gateway status` of a real gateway whose kernels get the default profile: each
prewarmed kernel is shown with its pool (kernel spec, profile, directory) and with its own pid
and memory, the ipykernel process inside the sandbox, not the bubblewrap that launched it."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

from tests.support.gateways import GatewayProcess, child_pids, client, prewarmed
from tests.translator.cli.test_commands import loomgate

POOLED = re.compile(r"  python3, workspace, in (?P<cwd>.+): pid (?P<pid>\d+), (?P<mb>\d+) MB")


def proc_file(pid: int, name: str) -> bytes:
    """Return the file `name` of process `pid` in /proc."""
    return Path(f"/proc/{pid}/{name}").read_bytes()


async def test_status_shows_each_pool_with_its_kernels_own_process(
    confined_gateway: GatewayProcess,
) -> None:
    gateway = confined_gateway  # the default profile: bubblewrap launches each kernel
    gateway.prewarm = 1
    gateway.start()
    async with client(gateway) as http:
        [kernel] = await prewarmed(http)
    launched = int(str(kernel["launched_pid"]))
    env = {
        **os.environ,
        "LOOMGATE_STATE_DIR": str(gateway.state_dir),
        "XDG_CONFIG_HOME": gateway.env["XDG_CONFIG_HOME"],
    }
    status, out, err = await loomgate(env, "gateway", "status")
    assert status == 0, err
    lines = out.splitlines()
    at = lines.index(
        "prewarmed: 1 idle kernel per kernel spec, sandbox profile and directory in use:"
    )
    shown = POOLED.fullmatch(lines[at + 1])
    assert shown is not None, out
    assert Path(shown["cwd"]) == gateway.cwd  # the default pool: the gateway's own directory
    pid = int(shown["pid"])
    # The kernel itself: an ipykernel process inside the sandbox bubblewrap made (whose own
    # arguments end with that command).
    arguments = (await asyncio.to_thread(proc_file, pid, "cmdline")).split(b"\0")
    assert arguments[1].endswith(b"/copy_launcher.py"), arguments  # ipykernel, copyable
    assert await asyncio.to_thread(proc_file, launched, "comm") == b"bwrap\n"
    assert pid != launched and pid in child_pids(launched)
    assert int(shown["mb"]) >= 20  # an idle kernel's own memory (bubblewrap's is ~2 MB)
