"""The refusal of a request that needs a kernel that is gone: who it was, when and how it ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from loomgate.gateway.kernels.references import ago, gone
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.records.stored_meta import KernelStart


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0.4, "0 s ago"),
        (59.9, "59 s ago"),
        (60, "1 min ago"),
        (3599, "59 min ago"),
        (7200, "2 h ago"),
        (86400, "1 day ago"),
        (3 * 86400 + 5, "3 days ago"),
        (-2, "0 s ago"),  # a clock set back
    ],
)
def test_ago(seconds: float, said: str) -> None:
    assert ago(seconds) == said


@pytest.mark.parametrize(
    ("name", "ended", "reason", "message"),
    [
        (
            "demo",
            100.0,
            None,
            "no kernel named demo (stopped 12 s ago; its records are still readable)",
        ),
        (
            None,
            100.0,
            None,
            "no kernel 01234567 (stopped 12 s ago; its records are still readable)",
        ),
        (
            "demo",
            100.0,
            "the kernel process was killed by SIGKILL",
            "no kernel named demo (ended 12 s ago: the kernel process was killed by SIGKILL; "
            "its records are still readable)",
        ),
        (
            "demo",
            None,
            "it did not answer",
            "no kernel named demo (not running: it did not answer; its records are still readable)",
        ),
    ],
)
def test_gone(
    tmp_path: Path, name: str | None, ended: float | None, reason: str | None, message: str
) -> None:
    kernel_id = "0123456789abcdef"
    start = KernelStart(
        id=kernel_id,
        name=name,
        lifetime="persistent",
        kernel_spec="python3",
        cwd=None,
        attached=None,
        sandbox=None,
    )
    store = RecordStore.create(tmp_path / kernel_id, start)
    store.meta["ended"], store.meta["end_reason"] = ended, reason
    refusal = gone(store, now=112.5)
    assert refusal.status == 503
    assert refusal.to_json() == {"error": "unavailable", "message": message, "kernel_id": kernel_id}
