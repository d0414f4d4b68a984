"""Which process a pid names: a live process's identity, a reused pid never taken for it, the
identity kept as JSON, and the end of a process that is not our child awaited."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import pytest

from loomgate.gateway.process_identity import ProcessIdentity, boot_id, start_seconds, start_time


def test_a_live_process_is_known_by_its_start_and_boot() -> None:
    me = ProcessIdentity.of(os.getpid())
    assert me is not None and me.is_alive()
    assert (me.pid, me.started, me.boot) == (os.getpid(), start_time(os.getpid()), boot_id())
    assert ProcessIdentity.from_json(me.to_json()) == me
    seconds = start_seconds(os.getpid())
    assert seconds is not None and 0 < seconds <= time.time()


@pytest.mark.parametrize(
    "other", [{"started": "not when it started"}, {"boot": "another boot"}], ids=["pid", "boot"]
)
def test_a_reused_pid_or_another_boot_is_not_the_process(other: dict[str, str]) -> None:
    me = ProcessIdentity.of(os.getpid())
    assert me is not None
    assert not ProcessIdentity(**{**vars(me), **other}).is_alive()


@pytest.mark.parametrize("data", [{}, {"pid": 1}, {"pid": 1, "started": "x"}, []])
def test_a_malformed_identity_is_refused(data: object) -> None:
    with pytest.raises(ValueError, match="not a process identity"):
        ProcessIdentity.from_json(data)  # type: ignore[arg-type]


def test_the_end_of_a_process_is_awaited_and_a_zombie_is_not_alive() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        identity = ProcessIdentity.of(child.pid)
        assert identity is not None and identity.is_alive()
        assert child.stdin is not None
        stdin = child.stdin

        async def end_it() -> bool:
            ended = asyncio.create_task(identity.ended())
            await asyncio.sleep(0)
            running = not ended.done()
            stdin.close()  # the child ends: a zombie until it is waited for
            await asyncio.wait_for(ended, 30)
            return running

        assert asyncio.run(end_it())  # it was awaited while the child ran
        assert not identity.is_alive() and ProcessIdentity.of(child.pid) is None
    finally:
        child.kill()
        child.wait()
