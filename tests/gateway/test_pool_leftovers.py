"""A pool kernel an earlier gateway left: ended at the next start, unless its claim had made it a
kernel of its own (its resident.json among the kernels'), which is left to be taken back."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import cast

from loomgate.gateway.kernels.manager_protocol import KernelMap
from loomgate.gateway.kernels.pool import POOL_DIR, KernelPool
from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency.resident import RESIDENT_FILE
from tests.gateway.residency.test_resident import FORMAT_1

SLEEPER = "import time; time.sleep(600)"
KERNEL = "0c1a55ed-0000-4000-8000-000000000001"


def leave_pool_kernel(state: Path, process: subprocess.Popen[bytes]) -> Path:
    """Write the pool's resident.json of a kernel whose process is `process` (a group leader,
    as a launched kernel is); return its dir."""
    data = json.loads(FORMAT_1.read_text())
    data["kernel_id"] = KERNEL
    data["connection_file"] = str(state / f"kernel-{KERNEL}.json")
    identity = ProcessIdentity.of(process.pid)
    assert identity is not None
    data["provisioner"].update(identity=identity.to_json(), pgid=None, sandbox=None)
    directory = state / POOL_DIR / KERNEL
    directory.mkdir(parents=True)
    (directory / RESIDENT_FILE).write_text(json.dumps(data))
    return directory


def pool(state: Path) -> KernelPool:
    """Return a pool of `state` (ending leftovers needs no kernel manager)."""
    return KernelPool(cast(KernelMap, None), state, 1, logging.getLogger(__name__))


def test_a_pool_kernel_left_unclaimed_is_ended(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        directory = leave_pool_kernel(tmp_path, process)
        assert pool(tmp_path).end_leftovers(tmp_path / "kernels") == 1
        assert process.wait(10) == -9
        assert not directory.exists()
    finally:
        process.kill()
        process.wait()


def test_a_pool_kernel_whose_claim_saved_its_own_state_is_left_running(tmp_path: Path) -> None:
    # Killed between the claim's resident.json and the pool's removal: a kernel now, taken back.
    process = subprocess.Popen([sys.executable, "-c", SLEEPER], start_new_session=True)
    try:
        directory = leave_pool_kernel(tmp_path, process)
        own = tmp_path / "kernels" / KERNEL
        own.mkdir(parents=True)
        (own / RESIDENT_FILE).write_text("{}")
        assert pool(tmp_path).end_leftovers(tmp_path / "kernels") == 0
        assert process.poll() is None
        assert not directory.exists()
    finally:
        process.kill()
        process.wait()
