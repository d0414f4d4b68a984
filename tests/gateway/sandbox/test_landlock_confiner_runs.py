"""Real starts through the Landlock-only confiner, as the provisioner starts a kernel: the
kernel put in its cgroups by the gateway (and unable to move processes into them), or held by
rlimits (RLIMIT_NPROC included); its secret unreadable, its project writable, nothing else."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

from loomgate.gateway.sandbox.confinement.landlock_confiner import LandlockConfiner, joined_fifo
from loomgate.gateway.sandbox.confinement.limits import KernelLimits, LimitsHost, limits_host
from tests.gateway.sandbox import sandboxes
from tests.gateway.sandbox.test_landlock_confiner import Kernel, kernel_in, place

__all__ = ["place"]  # the fixture, used here


def run_through(
    confiner: LandlockConfiner, kernel: Kernel, payload: str, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """Start `payload` through `confiner` as the provisioner starts a kernel, finish its start,
    and return how it ended."""
    connection = kernel.directory / "connection.json"
    connection.write_text("{}")
    process = confiner.spawn(
        kernel,
        [sys.executable, "-I", "-c", payload],
        lambda argv, fds: subprocess.Popen(
            argv,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            pass_fds=fds,
            start_new_session=True,
        ),
        cwd=cwd,
        connection_file=connection,
        unset_env=("JPY_PARENT_PID",),
    )
    try:
        assert asyncio.run(confiner.started(kernel, process.pid)) is None
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


PAYLOAD = """
import json, os, resource
def attempt(call):
    try:
        return call()
    except OSError as e:
        return type(e).__name__
print(json.dumps({
    "secret": attempt(lambda: open(SECRET).read()),
    "write": attempt(lambda: open("made", "w").write("x")),
    "outside": attempt(lambda: open(OUTSIDE, "w").write("x")),
    "tmp": attempt(lambda: open(os.path.join(os.environ["TMPDIR"], "t"), "w").write("x")),
    "nproc": resource.getrlimit(resource.RLIMIT_NPROC),
    "cgroup": [line for line in open("/proc/self/cgroup").read().splitlines() if ":pids:" in line],
    "procs": attempt(lambda: open(PROCS, "w").write(str(os.getpid()))),
}))
"""


def payload_for(place: Path, procs: str) -> str:
    """Return PAYLOAD for `place`, naming cgroup.procs file `procs`."""
    return (
        PAYLOAD.replace("SECRET", repr(str(place / "home" / ".ssh" / "id_rsa")))
        .replace("OUTSIDE", repr(str(place / "outside" / "x")))
        .replace("PROCS", repr(procs))
    )


def test_a_kernel_put_in_its_cgroups_by_the_gateway(place: Path) -> None:
    host = limits_host()
    limits = KernelLimits.create(f"ll-{uuid.uuid4().hex[:8]}", sandboxes.rules(processes=50), host)
    try:
        kernel = kernel_in(place, limits, processes=50)
        [procs] = limits.join_files
        done = run_through(
            LandlockConfiner(7, host), kernel, payload_for(place, procs), place / "project"
        )
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert seen["cgroup"][0].endswith(f"/loomgate-{limits.kernel_id}")
        assert seen["procs"] == "PermissionError"  # it cannot move processes into its cgroup
        assert (seen["secret"], seen["write"], seen["outside"], seen["tmp"]) == (
            "PermissionError",
            1,
            "PermissionError",
            1,
        )
        assert (place / "project" / "made").read_text() == "x"
        assert not joined_fifo(kernel.directory).exists() and kernel.ready_fd is None
    finally:
        assert limits.remove()


def test_a_kernel_without_cgroups_is_held_by_rlimits(place: Path) -> None:
    limits = KernelLimits.create("ll-rlimits", sandboxes.rules(processes=4321), LimitsHost())
    kernel = kernel_in(place, limits, processes=4321)
    done = run_through(LandlockConfiner(7), kernel, payload_for(place, "/nonexistent"), place)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["nproc"] == [4321, 4321] and seen["secret"] == "PermissionError"
    assert kernel.ready_fd is None  # nothing to join: the shell did not wait
