"""The entry run for real: its shell's one-line errors, arguments kept as they are, the exec in
the shell's own process, a run that joins the kernel's cgroups (by path, or by an fd it closes),
sets rlimits (RLIMIT_NPROC with the shell's own flag) and Landlock scopes and hands bwrap its info
fd, and one restricted to a whole Landlock ruleset with no capabilities (its plan and what needs
no exec: test_entry_plan.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from loomgate.gateway.sandbox.confinement import entry, landlock
from loomgate.gateway.sandbox.confinement.limits import KernelLimits, limits_host
from tests.gateway.sandbox import sandboxes

MiB = 2**20
ECHO_ARGV = "import json, os, sys; print(json.dumps([os.getpid(), sys.argv[1:]]))"


def run_entry(plan: entry.Plan, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the entry with `plan` in front of `argv`, as the gateway does."""
    return entry.spawn(
        plan,
        lambda: subprocess.run(
            entry.command(plan, argv), capture_output=True, text=True, timeout=60, check=False
        ),
    )


@pytest.mark.parametrize(
    ("plan", "argv", "status", "says"),
    [
        (
            entry.Plan(["/nonexistent/cgroup.procs"]),
            ["/bin/true"],
            1,
            "loomgate sandbox entry: cannot join the kernel's cgroup /nonexistent/cgroup.procs",
        ),
        (entry.Plan(), ["/nonexistent/bwrap", "--x"], 127, "/nonexistent/bwrap: not found"),
        # Soft above hard: the shell's ulimit refuses, and nothing runs.
        (
            entry.Plan(rlimits={"RLIMIT_DATA": (2 * MiB, MiB)}),
            ["/bin/echo", "ran"],
            1,
            "ulimit: error setting limit (Invalid argument)",
        ),
    ],
)
def test_errors_before_exec_are_one_line_and_nothing_runs(
    plan: entry.Plan, argv: list[str], status: int, says: str
) -> None:
    done = run_entry(plan, argv)
    assert (done.returncode, done.stdout) == (status, "")
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(entry.NAME), done.stderr
    assert says in done.stderr, done.stderr


def test_what_follows_runs_in_the_shells_own_process_with_its_arguments_as_they_are(
    tmp_path: Path,
) -> None:
    joined = tmp_path / "cgroup.procs"
    joined.write_text("")
    args = ["a b", "$HOME", "*", "--", "", "x\ny", "'\"", "-d"]
    done = run_entry(entry.Plan([str(joined)]), [sys.executable, "-I", "-c", ECHO_ARGV, *args])
    assert done.returncode == 0, done.stderr
    pid, seen = json.loads(done.stdout)
    assert seen == args
    assert joined.read_text() == f"{pid}\n"  # the pid that joined is the one that ran: an exec


def test_the_entrys_children_cannot_signal_outside_and_the_gateway_still_can() -> None:
    probe = f"import os; os.kill({os.getpid()}, 0)"
    refused = run_entry(entry.Plan(landlock=True), [sys.executable, "-I", "-c", probe])
    assert refused.returncode == 1 and "PermissionError" in refused.stderr, refused.stderr
    allowed = run_entry(entry.Plan(), [sys.executable, "-I", "-c", probe])
    assert allowed.returncode == 0, allowed.stderr
    os.kill(os.getpid(), 0)  # this thread was not scoped


def test_the_entry_applies_its_plan_before_bwrap(tmp_path: Path) -> None:
    limits = KernelLimits.create(
        f"entry-{uuid.uuid4().hex[:8]}", sandboxes.rules(memory=512 * MiB), limits_host()
    )
    try:
        payload = (
            "import json, os, resource\n"
            "lines = open('/proc/self/status').read().splitlines()\n"
            "status = dict(line.split(':\\t', 1) for line in lines)\n"
            "groups = open('/proc/self/cgroup').read().splitlines()\n"
            "print(json.dumps({\n"
            "    'no_new_privs': status['NoNewPrivs'].strip(),\n"
            "    'data': resource.getrlimit(resource.RLIMIT_DATA),\n"
            "    'cgroup': [line for line in groups if ':memory:' in line],\n"
            "    'fds': sorted(os.listdir('/proc/self/fd')),\n"
            "}))"
        )
        limits.rlimits["RLIMIT_DATA"] = (768 * MiB, 768 * MiB)  # both mechanisms at once, here
        rules = sandboxes.rules(writable=[tmp_path])
        done = sandboxes.run(rules, payload, cwd=tmp_path, kernel_dir=tmp_path / "k", limits=limits)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["no_new_privs"] == "1"  # Landlock was applied (it needs no_new_privs)
        assert result["data"] == [768 * MiB, 768 * MiB]
        assert result["cgroup"][0].endswith(f"/loomgate-{limits.kernel_id}")
        assert result["fds"] == ["0", "1", "2", "3"]  # bwrap's info fd did not follow inside
        assert limits.groups["memory"].exists()
    finally:
        assert limits.remove()


def test_processes_go_to_ulimit_with_the_shells_own_flag() -> None:
    # /bin/sh is dash here: -p is its processes limit (bash's -p is the pipe size, -u its own).
    assert Path("/bin/sh").resolve().name == "dash"
    assert entry.nproc_flag() == "-p"
    assert entry.nproc_flag("/bin/bash") == "-u"
    plan = entry.Plan(rlimits={"RLIMIT_NPROC": (20, 30), "RLIMIT_DATA": (MiB, MiB)})
    assert plan.args() == ["0", "2", "-p", "20", "30", "-d", "1024", "1024"]


def test_a_shell_without_a_processes_flag_is_refused(tmp_path: Path) -> None:
    shell = tmp_path / "sh"
    shell.write_text("#!/bin/sh\necho 'ulimit: Illegal option' >&2\nexit 2\n")
    shell.chmod(0o755)
    with pytest.raises(
        entry.PlanError,
        match=f"^the entry's shell \\({shell}\\) cannot set RLIMIT_NPROC with ulimit$",
    ):
        entry.nproc_flag(str(shell))


def test_a_shell_the_gateway_joins_waits_for_its_line(tmp_path: Path) -> None:
    fifo = tmp_path / "joined"
    os.mkfifo(fifo, 0o600)
    ready = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)
    plan = entry.Plan([f"<{fifo}"], {"RLIMIT_NPROC": (4096, 4096)})
    payload = "import resource; print(resource.getrlimit(resource.RLIMIT_NPROC))"
    process = entry.spawn(
        plan,
        lambda: subprocess.Popen(
            entry.command(plan, [sys.executable, "-I", "-c", payload]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
    )
    try:
        # Nothing runs while it waits: the shell is still the shell.
        assert Path(f"/proc/{process.pid}/exe").resolve() == Path("/bin/sh").resolve()
        assert process.poll() is None
        os.write(ready, b"\n")
        out, err = process.communicate(timeout=60)  # the line was read: it went on
    finally:
        os.close(ready)
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert (process.returncode, out, err) == (0, "(4096, 4096)\n", "")


def test_a_shell_whose_gateway_is_gone_runs_nothing(tmp_path: Path) -> None:
    fifo = tmp_path / "joined"
    os.mkfifo(fifo, 0o600)
    ready = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)
    plan = entry.Plan([f"<{fifo}"])
    process = entry.spawn(
        plan,
        lambda: subprocess.Popen(
            entry.command(plan, ["/bin/echo", "ran"]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ),
    )
    os.close(ready)  # as the gateway's death closes it, with no line written
    out, err = process.communicate(timeout=60)  # before the shell opened it, or after
    assert (process.returncode, out) == (1, "")
    assert err == f"{entry.NAME}: the gateway did not put it in the kernel's cgroups\n"


def test_a_whole_ruleset_holds_the_kernel_and_not_the_gateway(tmp_path: Path) -> None:
    allowed, hidden = tmp_path / "allowed", tmp_path / "hidden"
    allowed.mkdir()
    hidden.write_text("SECRET")
    ruleset = landlock.Ruleset(
        landlock.abi_version(),
        ((Path("/"), landlock.READ), (allowed, landlock.READ | landlock.WRITE)),
        tcp_ports=(),
    )
    # The ruleset reads everything but cannot write outside `allowed`, nor reach TCP.
    payload = (
        "import json, os, socket, sys\n"
        "def attempt(call):\n"
        "    try:\n"
        "        call()\n"
        "        return 'ok'\n"
        "    except OSError as e:\n"
        "        return type(e).__name__\n"
        "caps = [l for l in open('/proc/self/status') if l.startswith('CapEff')][0]\n"
        "print(json.dumps({\n"
        f"    'write_allowed': attempt(lambda: open({str(allowed / 'x')!r}, 'w').close()),\n"
        f"    'write_outside': attempt(lambda: open({str(tmp_path / 'y')!r}, 'w').close()),\n"
        f"    'read': attempt(lambda: open({str(hidden)!r}).read()),\n"
        "    'bind_tcp': attempt(lambda: socket.create_server(('127.0.0.1', 0)).close()),\n"
        "    'caps': caps.split()[1],\n"
        "}))"
    )
    plan = entry.Plan(ruleset=ruleset, drop_capabilities=True)
    done = run_entry(plan, [sys.executable, "-I", "-c", payload])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "write_allowed": "ok",
        "write_outside": "PermissionError",
        "read": "ok",
        "bind_tcp": "PermissionError",
        "caps": "0000000000000000",
    }
    assert (allowed / "x").exists() and not (tmp_path / "y").exists()
    (tmp_path / "y").write_text("the gateway's thread writes where it likes")
