"""Where a sandboxed kernel's start spends its time, stage by stage, without a gateway; and what
the sandbox costs a process's own work.

Run: `uv run --frozen python -m bench.sandbox_stages [--rounds 15] [--profile workspace]
[--lines-rounds 0]`

The gateway's per-start work in-process (the profile made concrete, the sandbox prepared, its
command built), then processes timed from spawn to exit (the entry exec'ing /bin/true, bwrap
with the kernel's mounts and with none running /bin/true, the entry and bwrap as the gateway
starts them), then whole kernels from spawn to their first kernel_info reply: unconfined,
through bwrap alone, through the entry and bwrap. The stages take turns; medians with ranges.
With `--lines-rounds N`: the 1,000,000-line cell's loop in a process of its own that times
itself, unconfined and through the entry and bwrap in turn, N rounds, each checked to have
printed every line."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import zmq
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.connect import write_connection_file

from bench.sandbox_bench import cpu_ms, median_interval
from loomgate.gateway.kernels.zmq_channels import RECONNECT_INTERVAL_MS
from loomgate.gateway.residency.kernel_command import copyable
from loomgate.gateway.sandbox.confinement import bubblewrap, entry
from loomgate.gateway.sandbox.confinement.bubblewrap_confiner import BubblewrapConfiner
from loomgate.gateway.sandbox.confinement.launch import SandboxLaunch
from loomgate.gateway.sandbox.confinement.mechanism import probe
from loomgate.gateway.sandbox.policy.catalog import SandboxCatalog
from tests.support.gateways import child_pids

READY_TIMEOUT = 20.0


def ms_since(began: int) -> float:
    """Return the milliseconds since `began` (perf_counter_ns)."""
    return (time.perf_counter_ns() - began) / 1e6


CPU: dict[str, list[float]] = {}  # each process stage's CPU time (user + system), ms


Start = Callable[[list[str], tuple[int, ...]], "subprocess.Popen[bytes]"]


def through(
    launch: SandboxLaunch | None, argv: list[str], start: Start, cwd: Path, connection_file: Path
) -> subprocess.Popen[bytes]:
    """Return `start(argv, fds)`'s process: through `launch`'s entry and bwrap, as the gateway's
    provisioner starts a kernel, when given; else as it is."""
    if launch is None:
        return start(argv, ())
    return launch.spawn(argv, start, cwd=cwd, connection_file=connection_file, unset_env=())


def exited(name: str, process: subprocess.Popen[bytes], began: int) -> float:
    """Return the ms from `began` to `process`'s exit (checked to succeed), noting its CPU time
    (of the process and the children it waited for) under `name`."""
    _, status, usage = os.wait4(process.pid, 0)
    took = ms_since(began)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.stderr is not None
    assert process.returncode == 0, (process.args, process.stderr.read().decode()[-500:])
    process.stderr.close()
    CPU.setdefault(name, []).append((usage.ru_utime + usage.ru_stime) * 1000)
    return took


def quiet(argv: list[str], fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
    """Start `argv` with its stdout discarded and its stderr kept for a failure's message."""
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=fds)


def spawned(name: str, argv: list[str], plan: entry.Plan | None = None) -> float:
    """Return the ms from spawning `argv` (on the entry's thread, scoped, under `plan`) to its
    exit, noting its CPU time under `name`."""
    began = time.perf_counter_ns()
    if plan is None:
        return exited(name, quiet(argv, ()), began)
    return exited(name, entry.spawn(plan, lambda: quiet(argv, ())), began)


def launched(
    name: str, launch: SandboxLaunch, kernel: list[str], project: Path, connection_file: Path
) -> float:
    """Return the ms from a start of `kernel` through the entry and bwrap, as the gateway's
    provisioner starts one, to its exit; noting its CPU time under `name`."""
    began = time.perf_counter_ns()
    return exited(name, through(launch, kernel, quiet, project, connection_file), began)


def tree_cpu_ms(pid: int) -> float:
    """Return the CPU time (ms) process `pid` and its live descendants, every thread, have run
    so far."""
    total = 0.0
    for each in (pid, *child_pids(pid)):
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            total += cpu_ms(each)
    return total


def kernel_ready(
    name: str,
    argv: list[str],
    connection_file: Path,
    env: dict[str, str],
    cwd: Path,
    launch: SandboxLaunch | None = None,
) -> float:
    """Return the ms from spawning kernel `argv` (through `launch`'s entry and bwrap, when
    given) to its first kernel_info reply, noting the CPU time its processes ran until then
    under `name`; the kernel (its sandbox's init when there is one) is killed after."""
    info = bubblewrap.info_file(connection_file.parent)
    info.unlink(missing_ok=True)
    for socket_file in bubblewrap.ipc_dir(connection_file.parent).iterdir():
        socket_file.unlink()  # the last kernel's: a client must not reach it before it is gone
    fds: tuple[int, ...] = ()
    if Path(argv[0]).name == "bwrap":  # bwrap alone: its info file opened here
        fds = (entry.open_info(info),)
        argv = [argv[0], "--info-fd", str(fds[0]), *argv[1:]]

    def start(argv: list[str], fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            pass_fds=fds,
        )

    began = time.perf_counter_ns()
    if launch is None:
        process = start(argv, fds)
    else:
        process = through(launch, argv, start, cwd, connection_file)
    for fd in fds:
        os.close(fd)
    client = BlockingKernelClient()
    client.load_connection_file(str(connection_file))
    # As the gateway's channels do: a connect refused before the kernel binds is tried again
    # soon, not after ZMQ's 100 ms and more.
    client.context.setsockopt(zmq.RECONNECT_IVL, RECONNECT_INTERVAL_MS)
    client.start_channels(iopub=False, stdin=False, hb=False, control=False)
    try:
        # The request waits in the client's socket until the kernel has bound its own.
        asked = client.kernel_info()
        while client.get_shell_msg(timeout=READY_TIMEOUT)["parent_header"].get("msg_id") != asked:
            pass
        took = ms_since(began)
        CPU.setdefault(name, []).append(tree_cpu_ms(process.pid))
    finally:
        client.stop_channels()
        if info.exists():  # the sandbox outlives bwrap killed alone: end it by its init
            bubblewrap.kill(entry.read_info(info, 5))
        else:
            process.kill()
        process.wait()  # bwrap exits once everything in the sandbox has
    return took


# The 1,000,000-line cell's loop as a process of its own, timing itself: what the sandbox could
# slow in a kernel's own work (its writes, its memory), with no gateway and no kernel around it.
LINES = (
    "import sys, time\n"
    "began = time.perf_counter()\n"
    "for i in range(1_000_000): print(i)\n"
    "sys.stdout.flush()\n"
    "print(time.perf_counter() - began, file=sys.stderr)"
)


def printed(launch: SandboxLaunch | None, project: Path, connection_file: Path) -> float:
    """Return the seconds the 1,000,000-line loop took in its own process (through `launch`'s
    entry and bwrap when given), checked to have printed all its lines."""
    argv = [sys.executable, "-I", "-c", LINES]

    def start(argv: list[str], fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=project, pass_fds=fds
        )

    process = through(launch, argv, start, project, connection_file)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err.decode()[-500:]
    assert out.count(b"\n") == 1_000_000, out.count(b"\n")
    return float(err.decode().strip().splitlines()[-1])


def lines_rows(rounds: int, launch: SandboxLaunch, project: Path, connection_file: Path) -> None:
    """Print the loop's time unconfined and confined, in turn, and their same-round ratio."""
    times: dict[str, list[float]] = {"unconfined": [], "confined": []}
    sides = {
        "unconfined": lambda: printed(None, project, connection_file),
        "confined": lambda: printed(launch, project, connection_file),
    }
    for turn in range(rounds + 1):  # the first turn warms up and is not counted
        order = list(sides) if turn % 2 else list(sides)[::-1]
        for side in order:
            took = sides[side]()
            if turn:
                times[side].append(took)
    turns = [c / u for c, u in zip(times["confined"], times["unconfined"], strict=True)]
    low, high = median_interval(turns)
    print(f"1,000,000 lines printed in a process of its own ({rounds} rounds, in turn):")
    medians({f"{side} (s × 1000)": [t * 1000 for t in v] for side, v in times.items()})
    print(
        f"confined / unconfined, same round: {statistics.median(turns):.3f}× "
        f"({min(turns):.3f}–{max(turns):.3f}; 95 % interval of the median {low:.3f}–{high:.3f}×)"
    )


def medians(samples: dict[str, list[float]]) -> None:
    """Print each stage's median and range."""
    width = max(map(len, samples))
    for name, values in samples.items():
        lo, mid, hi = min(values), statistics.median(values), max(values)
        print(f"{name:<{width}}  {mid:8.2f} ms  ({lo:.2f}–{hi:.2f})")


def main() -> None:
    """Measure the stages and print their medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--profile", default="workspace")
    parser.add_argument("--no-kernels", action="store_true", help="skip the whole kernels")
    parser.add_argument(
        "--lines-rounds", type=int, default=0, help="rounds of the 1,000,000-line loop"
    )
    args = parser.parse_args()
    root = Path("/var/tmp") / f"loomgate-stages-{uuid.uuid4().hex[:8]}"
    project, state = root / "project", root / "state"
    project.mkdir(parents=True)
    state.mkdir()
    catalog = SandboxCatalog(state, config_file=root / "sandbox.toml")
    kernel_id = str(uuid.uuid4())
    began = time.perf_counter_ns()
    mechanism = probe()
    print(f"probe (once per gateway): {ms_since(began):.1f} ms; {mechanism.describe()}")
    confiner = mechanism.confiner
    assert isinstance(confiner, BubblewrapConfiner), "these stages are bubblewrap's"
    env = {k: v for k, v in os.environ.items() if k != "JPY_PARENT_PID"}
    try:
        rules = catalog.choose(args.profile, stricter_only=False, cwd=project)
        launch = SandboxLaunch.prepare(rules, kernel_id)
        ipc = bubblewrap.ipc_dir(launch.directory)
        connection_file = ipc.parent / "kernel.json"
        write_connection_file(str(connection_file), transport="ipc", ip=launch.ipc_prefix, key=b"k")
        kernel = copyable(
            [
                sys.executable,
                "-m",
                "ipykernel_launcher",
                "-f",
                str(connection_file),
                "--HistoryManager.hist_file=:memory:",
            ]
        )
        bwrap_argv = bubblewrap.command(
            rules,
            kernel,
            bwrap=confiner.bwrap,
            cwd=project,
            kernel_dir=launch.directory,
            connection_file=connection_file,
            unset_env=("JPY_PARENT_PID",),
        )
        bwrap_true = [*bwrap_argv[: bwrap_argv.index("--", 1) + 1], "/bin/true"]
        minimal = [confiner.bwrap, *bubblewrap.ISOLATION, "--ro-bind", "/", "/"]
        minimal += ["--dev", "/dev", "--proc", "/proc", "--", "/bin/true"]
        plan = confiner.plan(launch)
        entry_true = entry.command(plan, ["/bin/true"])
        print(
            f"bwrap arguments: {len(bwrap_argv)}; mounts of hidden paths: "
            f"{sum(a in ('--tmpfs', '--ro-bind', '--bind') for a in bwrap_argv)}"
        )

        def rules_stage() -> float:
            t = time.perf_counter_ns()
            catalog.choose(args.profile, stricter_only=False, cwd=project)
            return ms_since(t)

        def prepare_stage() -> float:
            t = time.perf_counter_ns()
            prepared = SandboxLaunch.prepare(rules, kernel_id)
            confiner.command(
                prepared, kernel, cwd=project, connection_file=connection_file, unset_env=("X",)
            )
            return ms_since(t)

        stages: dict[str, Callable[[], float]] = {
            "gateway: profile made concrete": rules_stage,
            "gateway: sandbox prepared + command": prepare_stage,
            "entry -> /bin/true": lambda: spawned("entry", entry_true, plan),
            "bwrap (minimal) -> /bin/true": lambda: spawned("bwrap (minimal)", minimal),
            "bwrap (kernel's mounts) -> /bin/true": lambda: spawned("bwrap", bwrap_true),
            "entry + bwrap -> /bin/true": lambda: launched(
                "entry + bwrap", launch, ["/bin/true"], project, connection_file
            ),
        }
        if not args.no_kernels:
            stages |= {
                "kernel unconfined -> kernel_info": lambda: kernel_ready(
                    "kernel unconfined", kernel, connection_file, env, project
                ),
                "kernel in bwrap -> kernel_info": lambda: kernel_ready(
                    "kernel in bwrap", bwrap_argv, connection_file, env, project
                ),
                "kernel entry + bwrap -> kernel_info": lambda: kernel_ready(
                    "kernel entry + bwrap", kernel, connection_file, env, project, launch
                ),
            }
        for stage in stages.values():  # warm the page cache
            stage()
        samples: dict[str, list[float]] = {name: [] for name in stages}
        for _ in range(args.rounds):
            for name, stage in stages.items():
                samples[name].append(stage())
        medians(samples)
        print("CPU time of the process stages (a kernel's: all its processes until its reply):")
        medians({name: values[-args.rounds :] for name, values in CPU.items()})
        if args.lines_rounds:
            lines_rows(args.lines_rounds, launch, project, connection_file)
        launch.remove()
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(
            Path(tempfile.gettempdir()) / f"loomgate-{os.getuid()}" / kernel_id[:13],
            ignore_errors=True,
        )


if __name__ == "__main__":
    main()
