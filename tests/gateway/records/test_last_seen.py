"""last-seen.json: when a gateway last listened to its kernels, written on a timer, read back."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

import pytest

from loomgate.gateway.records.last_seen import (
    BEAT_SECONDS,
    LAST_SEEN_FILE,
    Heartbeat,
    read_last_seen,
)

LOG = logging.getLogger("test_last_seen")


def test_the_file_and_beat_are_as_documented() -> None:
    assert LAST_SEEN_FILE == "last-seen.json"
    assert BEAT_SECONDS == 2.0


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ({"time": 12.5, "kernels": ["a", "b"]}, {"a": 12.5, "b": 12.5}),
        ({"time": "12.5", "kernels": [3]}, {"3": 12.5}),  # as older or other writers spell it
        ({"time": 1, "kernels": []}, {}),
        ({"time": "soon", "kernels": ["a"]}, {}),  # not a time
        ({"time": None, "kernels": ["a"]}, {}),
        ({"time": 1.0, "kernels": 5}, {}),  # not a list of kernels
        ({"kernels": ["a"]}, {}),
        ({"time": 1.0}, {}),
        ([1, 2], {}),
    ],
)
def test_what_a_gateway_reads_of_its_predecessors_beat(
    tmp_path: Path, written: object, read: dict[str, float]
) -> None:
    (tmp_path / LAST_SEEN_FILE).write_text(json.dumps(written))
    assert read_last_seen(tmp_path) == read


def test_no_file_or_a_torn_one_reads_as_nothing_seen(tmp_path: Path) -> None:
    assert read_last_seen(tmp_path) == {}
    (tmp_path / LAST_SEEN_FILE).write_text('{"time": 1.0, "kern')
    assert read_last_seen(tmp_path) == {}
    (tmp_path / LAST_SEEN_FILE).write_bytes(b"\xff\xfe")
    assert read_last_seen(tmp_path) == {}


async def test_a_heartbeat_writes_now_then_every_beat_and_once_more_when_stopped(
    tmp_path: Path,
) -> None:
    kernels = ["b", "a"]
    beat = Heartbeat(tmp_path, lambda: kernels, LOG)
    beat.stop()  # never started: nothing to write
    assert not (tmp_path / LAST_SEEN_FILE).exists()
    loop = asyncio.get_running_loop()
    before = time.time()
    beat.start()
    written = json.loads((tmp_path / LAST_SEEN_FILE).read_text())
    assert written["kernels"] == ["a", "b"]  # sorted
    assert before <= written["time"] <= time.time()
    assert beat._handle is not None
    assert beat._handle.when() - loop.time() == pytest.approx(BEAT_SECONDS, abs=0.05)
    assert read_last_seen(tmp_path) == {"a": written["time"], "b": written["time"]}
    kernels.append("c")
    (tmp_path / LAST_SEEN_FILE).unlink()
    beat.stop()
    assert beat._handle is None
    assert json.loads((tmp_path / LAST_SEEN_FILE).read_text())["kernels"] == ["a", "b", "c"]
    (tmp_path / LAST_SEEN_FILE).unlink()
    beat.stop()  # stopped already: no further beat
    assert not (tmp_path / LAST_SEEN_FILE).exists()


async def test_the_timer_beats_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("loomgate.gateway.records.last_seen.BEAT_SECONDS", 0.01)
    beats: list[int] = []
    three = asyncio.Event()

    def listening() -> list[str]:
        beats.append(1)
        if len(beats) == 3:
            three.set()
        return []

    beat = Heartbeat(tmp_path, listening, LOG)
    beat.start()
    try:
        await asyncio.wait_for(three.wait(), 10)
    finally:
        beat.stop()


def test_a_refused_write_keeps_the_older_file_and_warns_once_a_spell(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    beat = Heartbeat(tmp_path / "gone", lambda: ["a"], LOG)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        beat._write()
        beat._write()
        assert len(caplog.records) == 1
        assert (
            caplog.records[0]
            .getMessage()
            .startswith("Cannot note when the gateway last listened: [Errno 2] No such file")
        )
        (tmp_path / "gone").mkdir()
        beat._write()  # works again
        assert read_last_seen(tmp_path / "gone") == {"a": pytest.approx(time.time(), abs=5)}
        (tmp_path / "gone" / LAST_SEEN_FILE).unlink()
        (tmp_path / "gone").rmdir()
        beat._write()  # a new spell of failures is said again
        assert len(caplog.records) == 2
