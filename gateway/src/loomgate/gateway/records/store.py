"""A kernel's record store on disk: kernel.json and a directory per execution."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Literal

from loomgate.gateway.errors import StorageFailed
from loomgate.gateway.records.journal import (
    Journal,
    SentEntry,
    end_as_journalled,
    end_entry,
)
from loomgate.gateway.records.record import LEFT_RUNNING, ExecutionRecord, os_error_reason
from loomgate.gateway.records.stored_meta import (
    KERNEL_FILE,
    RECORD_FILE,
    KernelMeta,
    KernelStart,
    Restart,
    new_kernel_meta,
    open_to_agents,
    read_kernel_meta,
)
from loomgate.gateway.records.unsaved import unsaved_record
from loomgate.shared.paths import write_json_atomic
from loomgate.shared.wire import Kernel, Setup, Source

log = logging.getLogger(__name__)


def storage_failed(directory: Path, error: OSError) -> StorageFailed:
    """Return the refusal for a record directory the disk will not write to."""
    return StorageFailed(
        f"the gateway cannot store records in {directory}: {os_error_reason(error)}; "
        "free space or fix permissions there, then retry",
        reason=os_error_reason(error),
    )


def probe_writable(directory: Path) -> None:
    """Raise StorageFailed unless a small file can be written to and removed from `directory`."""
    try:
        write_json_atomic(directory / ".probe", {"probe": True})
        (directory / ".probe").unlink()
    except OSError as error:
        raise storage_failed(directory, error) from None


class RecordStore:
    """One kernel's records: `kernel.json` plus a directory per execution number."""

    def __init__(self, directory: Path, meta: KernelMeta) -> None:
        self.directory = directory
        self.meta = meta
        self._records: dict[int, ExecutionRecord] | None = None
        self.storage_error: OSError | None = None  # the last refused write, until a probe passes
        self.journal = Journal(directory)
        # The last moment the gateway before this one was known to listen to the kernel.
        self.left_seen = 0.0

    @classmethod
    def create(cls, directory: Path, start: KernelStart) -> RecordStore:
        """Return a new store for a kernel that just started, written to disk."""
        store = cls(directory, new_kernel_meta(start, created=time.time()))
        store._records = {}
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_json_atomic(directory / KERNEL_FILE, store.meta)
        except OSError as error:
            raise storage_failed(directory, error) from None
        return store

    @classmethod
    def load(cls, directory: Path) -> RecordStore:
        """Return the store in `directory` (its records are read when first needed)."""
        return cls(directory, read_kernel_meta(directory))

    @property
    def kernel_id(self) -> str:
        """Return the kernel id this store belongs to."""
        return self.meta["id"]

    @property
    def last_number(self) -> int:
        """Return the highest execution number ever given out (0 before the first)."""
        return self.meta["last_number"]

    def save(self) -> None:
        """Write kernel.json (a refused write is logged: the old file stays whole)."""
        try:
            write_json_atomic(self.directory / KERNEL_FILE, self.meta)
        except OSError as error:
            self._storage_failed(error)

    def _storage_failed(self, error: OSError) -> None:
        if self.storage_error is None:
            log.error("Cannot store records in %s: %s", self.directory, os_error_reason(error))
        self.storage_error = error

    def check_writable(self) -> None:
        """Raise StorageFailed if the last write failed and the directory still refuses one."""
        if self.storage_error is None:
            return
        probe_writable(self.directory)
        try:
            for record in self._loaded().values():
                if record.meta["unstored"] is not None and record.final:
                    record.save_again()  # its record.json may never have been written
        except OSError as error:
            raise storage_failed(self.directory, error) from None
        log.warning("Records in %s can be stored again", self.directory)
        self.storage_error = None

    def _loaded(self, *, running_ok: bool = False) -> dict[int, ExecutionRecord]:
        if self._records is None:
            records, unsaved, unreadable = self._read_records()
            sends = self.journal.sends()
            for number in unsaved:
                directory = self.directory / str(number)
                record = unsaved_record(directory, self.kernel_id, number, records, sends)
                if record is None:
                    log.warning(
                        "Cannot read record %d of kernel %s (%s): its record.json was never "
                        "written and the journal names no cell for it",
                        number,
                        self.kernel_id,
                        directory,
                    )
                    continue
                log.warning(
                    "Record %d of kernel %s had no record.json (its gateway stopped as the cell "
                    "began); made again from the journal",
                    number,
                    self.kernel_id,
                )
                records[number] = record
            ends = self.journal.ends()
            for record in records.values():
                record.left_seen = self.left_seen
                # One taken back running ends here: journalled, as a record begun here is.
                record.on_end = self._journal_end
                record.on_storage_error = self._storage_failed
                ended = ends.get(record.number)
                if not record.final and ended is not None:  # its reply told this
                    end_as_journalled(record, ended)
                if not record.final and not running_ok:
                    record.end_unseen("lost", LEFT_RUNNING)
            self._records = dict(sorted(records.items()))
            # A number whose record cannot be read is not given out again.
            if taken := [*records, *unreadable]:
                self.meta["last_number"] = max(self.last_number, max(taken))
        return self._records

    def _read_records(self) -> tuple[dict[int, ExecutionRecord], list[int], list[int]]:
        """Return the records on disk by number, the numbers whose record.json was never
        written, and those whose record.json cannot be read (each said in the log)."""
        records: dict[int, ExecutionRecord] = {}
        unsaved: list[int] = []
        unreadable: list[int] = []
        for child in self.directory.iterdir():
            if not child.name.isdigit() or not child.is_dir():
                continue
            if not (child / RECORD_FILE).exists():
                unsaved.append(int(child.name))
                continue
            try:
                record = ExecutionRecord.load(child, running_ok=True)
            except (OSError, ValueError, KeyError, TypeError) as error:
                log.warning(
                    "Cannot read record %s of kernel %s (%s): %s; it is left as it is on disk",
                    child.name,
                    self.kernel_id,
                    child / RECORD_FILE,
                    error,
                )
                unreadable.append(int(child.name))
                continue
            records[record.number] = record
        return records, sorted(unsaved), unreadable

    def new_record(
        self, *, number: int, msg_id: str, code: str, source: Source, client: str | None = None
    ) -> ExecutionRecord:
        """Return a new running record numbered `number` (above every earlier one)."""
        number = max(number, self.last_number + 1)
        record = ExecutionRecord.create(
            self.directory / str(number),
            kernel_id=self.kernel_id,
            number=number,
            msg_id=msg_id,
            code=code,
            source=source,
            client=client,
            on_storage_error=self._storage_failed,
        )
        record.on_end = self._journal_end
        self._loaded()[number] = record
        self.meta["last_number"] = number  # saved with kernel.json when the kernel ends
        return record

    def journal_sent(self, msg_id: str, code: str, client: str | None) -> None:
        """Note a cell about to be sent (a refused write is noted: the cell still goes)."""
        try:
            self.journal.append(SentEntry(sent=msg_id, code=code, client=client, time=time.time()))
        except OSError as error:
            self._storage_failed(error)

    def unstarted_sends(self) -> list[SentEntry]:
        """Return the journalled cells no record follows (sent, never seen to start)."""
        known = {record.msg_id for record in self._loaded().values()}
        return [entry for entry in self.journal.sends() if entry["sent"] not in known]

    def _journal_end(self, record: ExecutionRecord) -> None:
        try:
            self.journal.append(end_entry(record))
        except OSError as error:
            log.error(
                "Cannot journal how record %d of kernel %s ended (%s): %s; a gateway killed "
                "before its record.json is written reads it lost",
                record.number,
                self.kernel_id,
                record.state,
                os_error_reason(error),
            )
            self._storage_failed(error)

    def get(self, number: int) -> ExecutionRecord | None:
        """Return record `number`, or None."""
        return self._loaded().get(number)

    def latest(self) -> ExecutionRecord | None:
        """Return the most recent record, or None before the first."""
        records = self._loaded()
        return records[next(reversed(records))] if records else None

    def all(self) -> list[ExecutionRecord]:
        """Return every record, oldest first."""
        return list(self._loaded().values())

    def running_when_left(self) -> ExecutionRecord | None:
        """Return the execution that was running when the last gateway went away, if any.

        Only for a kernel being taken back: its records load with that one still running (an
        older unfinished one, which cannot be, is `lost`).
        """
        unfinished = [r for r in self._loaded(running_ok=True).values() if not r.final]
        for stale in unfinished[:-1]:
            stale.end_unseen("lost", LEFT_RUNNING)
        return unfinished[-1] if unfinished else None

    def last_activity(self) -> float:
        """Return when the kernel was last active as its records know it: its creation, a
        restart, or its latest execution's start, output or end (what a gateway that takes
        the kernel back shows, rather than the moment it took it back)."""
        times = [self.meta["created"], *(r["time"] for r in self.meta.get("restarts", []))]
        latest = self.latest()
        if latest is not None:
            times += [latest.meta["started"], latest.last_output, latest.meta["finished"] or 0.0]
        return max(times)

    def reopen(self) -> None:
        """Note that the kernel is live again (attached once more on its upstream): its
        records and numbering go on."""
        self.all()  # loading ends the records that were running `lost`
        self.meta["ended"] = None
        self.meta["end_reason"] = None
        self.save()

    def mark_ended(self, reason: str | None = None) -> None:
        """Note that the kernel is gone, and why if nobody stopped it (its records stay for the
        retention period)."""
        self.meta["ended"] = time.time()
        self.meta["end_reason"] = reason
        self.save()

    def note_paths(self, paths: list[str]) -> None:
        """Keep the Jupyter session paths (notebooks, consoles) that use the kernel now."""
        if self.meta.get("paths", []) != paths:
            self.meta["paths"] = paths
            self.save()

    @property
    def open_to_agents(self) -> bool:
        """Return whether a model may use the kernel (wire.Kernel's `open_to_agents`)."""
        return open_to_agents(self.meta)

    def note_open_to_agents(self, opened: bool) -> None:
        """Keep whether a model may use the kernel (the person opened or closed it)."""
        self.meta["open_to_agents"] = opened
        self.save()

    def note_restart(
        self, cause: Literal["reset", "died", "rollback"], reason: str | None = None
    ) -> None:
        """Note that the kernel's state is lost here (a reset, its process died, or a rollback
        to a checkpoint: `reason` says which)."""
        restart = Restart(after=self.last_number, time=time.time(), cause=cause, reason=reason)
        self.meta["restarts"] = [*self.meta.get("restarts", []), restart]
        self.save()

    def note_pending(self, reason: str | None) -> None:
        """Note why a kernel left running by an earlier gateway is not taken back yet (None once
        it is)."""
        self.meta["end_reason"] = reason
        self.save()

    def model(self) -> Kernel:
        """Return the kernel's wire form as its records know it (a gone kernel's whole model)."""
        meta = self.meta
        latest = self.latest()
        return Kernel(
            id=self.kernel_id,
            name=meta.get("name"),
            kernel_spec=meta.get("kernel_spec"),
            lifetime=meta.get("lifetime", "persistent"),
            state="gone",
            alive=False,
            current_execution=None,
            executions=len(self.all()),
            last_execution=latest.number if latest else None,
            last_activity=meta.get("ended"),
            connections=0,
            holders=0,
            held_by=[],
            stops_at=None,
            cwd=meta.get("cwd"),
            paths=list(meta.get("paths", [])),
            created=meta.get("created"),
            ended=meta.get("ended"),
            end_reason=meta.get("end_reason"),
            attached=meta.get("attached"),
            implementation=meta.get("implementation", ""),
            language=str((meta.get("language_info") or {}).get("name") or "").lower(),
            setup=kept_setup(meta),
            sandbox=meta.get("sandbox"),
            open_to_agents=open_to_agents(meta),
            checkpoints=[],
            forked_from=meta.get("forked_from"),
        )


def kept_setup(meta: KernelMeta) -> Setup:
    """Return the setup kept in a kernel's kernel.json (none for kernels from before setups)."""
    kept = meta.get("setup")
    if not kept:
        return Setup(parts=[], results=[])
    return Setup(parts=[part["name"] for part in kept["parts"]], results=list(kept["results"]))
