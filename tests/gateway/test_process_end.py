"""How a kernel's process ended, table-driven: the cause the code acts on and the sentence said
of it, from its exit status."""

from __future__ import annotations

import pytest

from loomgate.gateway.process_end import Ending, exit_ending


@pytest.mark.parametrize(
    ("returncode", "ending"),
    [
        (None, Ending("no_answer", "the kernel process stopped responding")),
        (0, Ending("exit", "the kernel process exited with code 0")),
        (3, Ending("exit", "the kernel process exited with code 3")),
        (-9, Ending("signal", "the kernel process was killed by SIGKILL")),
        (-99, Ending("signal", "the kernel process was killed by signal 99")),
    ],
)
def test_an_exit_status_as_an_ending(returncode: int | None, ending: Ending) -> None:
    assert exit_ending(returncode) == ending


def test_an_ending_under_an_execution() -> None:
    ending = Ending("memory_limit", "killed: memory limit 1 GiB reached")
    assert ending.death(restarted=False) == {
        "reason": "killed: memory limit 1 GiB reached",
        "cause": "memory_limit",
        "restarted": False,
    }
