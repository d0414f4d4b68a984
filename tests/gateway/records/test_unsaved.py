"""A record whose first record.json was never written, made again from the journal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loomgate.gateway.records.journal import SentEntry
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.unsaved import sent_as, unsaved_record


def sent(msg_id: str, code: str = "x", when: float = 1.0) -> SentEntry:
    """Return a journalled cell."""
    return SentEntry(sent=msg_id, code=code, client=None, time=when)


def records(tmp_path: Path, claimed: dict[int, str]) -> dict[int, ExecutionRecord]:
    """Return records by number, each following the cell with the msg_id given."""
    return {
        n: ExecutionRecord.create(
            tmp_path / str(n), kernel_id="k", number=n, msg_id=m, code="", source="loomgate"
        )
        for n, m in claimed.items()
    }


@pytest.mark.parametrize(
    ("number", "claimed", "sends", "found"),
    [
        (1, {}, ["a"], 0),  # the first cell
        (1, {}, [], -1),  # no cell journalled
        (3, {1: "a", 2: "b"}, ["a", "b", "c"], 2),
        (3, {1: "a", 2: "b"}, ["a", "b", "c", "d"], 2),  # the first after the one below
        (3, {1: "a", 2: "b"}, ["a", "b"], -1),  # none after it
        (2, {1: "a", 3: "c"}, ["a", "b", "c"], 1),  # between the records around it
        (2, {1: "a", 3: "c"}, ["a", "c"], -1),  # none between them
        (2, {1: "a", 3: "c"}, ["a", "c", "b"], -1),  # sent after the record above it
        (5, {1: "a", 7: "x"}, ["a", "b", "c"], 1),  # a claim on a send not journalled
        (1, {2: "b"}, ["a", "b"], 0),
        (1, {2: "b"}, ["b", "a"], -1),
        (4, {2: "b", 3: "zz"}, ["a", "b", "c"], 2),  # record 3 another client's (not sent)
        (2, {1: "a", 2: "b"}, ["a", "b", "c"], 1),  # a record claiming its cell is found there
    ],
)
def test_the_cell_a_record_ran_is_the_first_sent_after_the_one_below_it(
    tmp_path: Path, number: int, claimed: dict[int, str], sends: list[str], found: int
) -> None:
    assert sent_as(number, records(tmp_path, claimed), [sent(m) for m in sends]) == found


def test_a_record_made_again_runs_the_journalled_cell_and_is_saved(tmp_path: Path) -> None:
    below = records(tmp_path, {1: "a"})
    directory = tmp_path / "2"
    directory.mkdir()
    (directory / "rich.jsonl").write_text('{"index": 0, "line": 1}\n')
    journalled = [sent("a"), SentEntry(sent="b", code="print(2)", client="conv", time=7.5)]
    record = unsaved_record(directory, "k", 2, below, journalled)
    assert record is not None
    stored = json.loads((directory / "record.json").read_text())
    for meta in (record.meta, stored):
        assert meta["kernel_id"] == "k"
        assert meta["number"] == 2
        assert meta["msg_id"] == "b"
        assert meta["code"] == "print(2)"
        assert meta["client"] == "conv"
        assert meta["source"] == "loomgate"
        assert meta["started"] == 7.5
        assert meta["state"] == "running"
    assert record.directory == directory
    assert [dict(e) for e in record.rich.entries] == [{"index": 0, "line": 1}]
    assert unsaved_record(tmp_path / "3", "k", 3, below, [sent("a")]) is None
    assert not (tmp_path / "3").exists()


def test_the_first_record_made_again_runs_the_first_cell_journalled(tmp_path: Path) -> None:
    directory = tmp_path / "1"
    directory.mkdir()
    record = unsaved_record(directory, "k", 1, {}, [sent("a", "print(1)"), sent("b")])
    assert record is not None
    meta = record.meta
    assert (meta["number"], meta["msg_id"], meta["code"]) == (1, "a", "print(1)")
    assert json.loads((directory / "record.json").read_text())["msg_id"] == "a"
