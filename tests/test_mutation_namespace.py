"""bench.mutation runs a target whose mutants signal in a PID namespace of its own, where a
mutant that SIGKILLs every pid it sees reaches only the run's own processes and not mutmut."""

from __future__ import annotations

import subprocess
import sys

from bench.mutation import TARGETS, mutmut_command

# Run as the namespace's init: a child SIGKILLs every process it can see, itself included.
INIT = """
import os, subprocess, sys
killer = "import os\\nfor p in os.listdir('/proc'):\\n if p.isdigit(): os.kill(int(p), 9)"
seen = [int(p) for p in os.listdir('/proc') if p.isdigit()]
code = subprocess.run([sys.executable, '-c', killer]).returncode
print(os.getpid(), code, max(seen))
"""


def test_the_targets_whose_mutants_may_signal_are_marked() -> None:
    signalling = [t.name for t in TARGETS if t.signals]
    assert signalling == ["launch markers", "sandbox mechanism (core)"]
    plain = [t for t in TARGETS if not t.signals]
    assert mutmut_command(plain) == [sys.executable, "-m", "mutmut", "run"]


def test_a_mutant_killing_every_pid_it_sees_spares_mutmut_and_the_machine() -> None:
    command = mutmut_command([t for t in TARGETS if t.signals])
    assert command[-6:] == [sys.executable, "-m", "mutmut", "run", "--max-children", "1"]
    namespace = command[: command.index(sys.executable)]
    assert namespace[0] == "unshare" and "--pid" in namespace and "--mount-proc" in namespace
    ran = subprocess.run(
        [*namespace, sys.executable, "-c", INIT], capture_output=True, text=True, timeout=30
    )
    assert ran.returncode == 0, ran.stderr
    init, killer_code, highest_pid = (int(word) for word in ran.stdout.split())
    assert init == 1  # mutmut's place: the SIGKILL its pid was sent was dropped
    assert killer_code == -9  # the killer reached itself, so it signalled every pid it saw
    assert highest_pid < 10  # it saw only the namespace's few processes, none of the host's
