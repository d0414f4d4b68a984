"""Records whose first record.json a killed gateway never wrote: its directory exists, named by
the number the kernel gave the cell, and the journal holds the cell it was sent as.

IOPub's `execute_input` makes the directory; record.json follows in the next loop turn, after
the submitter's 201 already named the number. The cell was journalled before it was sent, and
cells run one at a time: the one for number N is the first sent after the cell of the record
below it, and before the cell of the record above it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from loomgate.gateway.records.journal import SentEntry
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.rich_outputs import RichOutputs
from loomgate.gateway.records.stored_meta import new_record_meta


def sent_as(number: int, records: Mapping[int, ExecutionRecord], sends: list[SentEntry]) -> int:
    """Return the position in `sends` of the cell that record `number` ran (-1 if the journal
    does not tell it): the first one after the cell of the record below it that no record
    claims, if no record above it claims one sent earlier."""
    position = {entry["sent"]: i for i, entry in enumerate(sends)}
    claimed = {position[r.msg_id]: n for n, r in records.items() if r.msg_id in position}
    after = max((i for i, n in claimed.items() if n < number), default=-1)
    before = min((i for i, n in claimed.items() if n > number), default=len(sends))
    return after + 1 if after + 1 < before else -1


def unsaved_record(
    directory: Path,
    kernel_id: str,
    number: int,
    records: Mapping[int, ExecutionRecord],
    sends: list[SentEntry],
) -> ExecutionRecord | None:
    """Return record `number`, whose record.json was never written, made again from the cell
    the journal says it ran and saved (None if the journal does not say it)."""
    found = sent_as(number, records, sends)
    if found < 0:
        return None
    sent = sends[found]
    meta = new_record_meta(
        kernel_id, number, sent["sent"], sent["code"], "loomgate", sent["client"], sent["time"]
    )
    record = ExecutionRecord(directory, meta, rich=RichOutputs.read_index(directory))
    record.save()
    return record
