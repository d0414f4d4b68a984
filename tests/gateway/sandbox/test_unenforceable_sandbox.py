"""A profile no mechanism here can enforce: the kernel does not start, the refusal names what is
missing and how to get it, info says why no mechanism is in force, and `none` (what the refusal
offers) still works. Forced here by LOOMGATE_SANDBOX_MECHANISM=bubblewrap on a PATH without
one (this machine has Landlock, which would otherwise confine the kernel)."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cells import KERNELS
from tests.support.gateways import GatewayProcess, child_pids, client
from tests.support.sandboxed_gateways import sandbox_root


@pytest.fixture
def root() -> Iterator[Path]:
    """A directory outside the host's /tmp for the gateway's state, config and project."""
    with sandbox_root() as path:
        yield path


def kernel_processes(pid: int) -> list[int]:
    """Return the descendants of `pid` that run a kernel (or bubblewrap, which would start one)."""
    found = []
    for child in child_pids(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if b"copy_launcher.py" in command or b"bwrap" in command:
            found.append(child)
    return found


async def test_a_profile_without_its_mechanism_refuses_the_kernel_and_names_what_is_missing(
    root: Path,
) -> None:
    # This PATH holds the environment's own commands (python, loomgate's) and no bwrap.
    path = str(Path(sys.executable).parent)
    assert shutil.which("bwrap", path=path) is None
    env = {
        "XDG_CONFIG_HOME": str(root / "config"),
        "PATH": path,
        "LOOMGATE_SANDBOX_MECHANISM": "bubblewrap",
    }
    gateway = GatewayProcess(root / "state", env=env)
    try:
        gateway.start()
        assert gateway.proc is not None
        async with client(gateway) as http:
            info = (await http.get("/api/loomgate/info")).json()
            assert info["sandbox_mechanism"] is None and info["sandbox_lacks"] == []
            assert info["sandbox_refused"][0] == "no bubblewrap on PATH"
            for asked in ({}, {"sandbox": "strict"}):  # the default (workspace), and strict
                r = await http.post(KERNELS, json={**asked, "cwd": str(root / "project")})
                assert r.status_code == 503, (asked, r.text)
                message = r.json()["message"]
                assert message.startswith("no sandbox mechanism works here (no bubblewrap on "), (
                    message
                )
                assert "unset LOOMGATE_SANDBOX_MECHANISM (or set it to auto)" in message, message
                assert message.endswith("or choose the sandbox profile none"), message
                assert kernel_processes(gateway.proc.pid) == [], asked
            assert (await http.get(KERNELS)).json()["kernels"] == []
            assert (await http.get("/api/kernels")).json() == []
            # What the refusal offers works: an unconfined kernel starts.
            r = await http.post(KERNELS, json={"sandbox": "none", "cwd": str(root / "project")})
            assert r.status_code == 201, r.text
            assert r.json()["kernel"]["sandbox"]["profile"] == "none"
            await http.delete(f"{KERNELS}/{r.json()['kernel']['id']}")
    finally:
        gateway.stop()
