"""What kernel.json and record.json hold: the typed metadata of a kernel's records and of one
execution, read as an older gateway wrote them (the keys and values on disk never change shape).

A key that a file may lack, because it applies only sometimes or an older gateway did not write
it yet, lives in a `total=False` subclass of the shape (as in `loomgate.shared.wire`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, TypedDict

from loomgate.shared.wire import (
    Death,
    ErrorInfo,
    ExecutionState,
    ForkedFrom,
    Gap,
    InputRequest,
    Lifetime,
    Sandbox,
    SandboxFailure,
    SetupPart,
    SetupResult,
    Source,
    StreamName,
    StreamSize,
    Unstored,
)

KERNEL_FILE = "kernel.json"
RECORD_FILE = "record.json"

# -- kernel.json ------------------------------------------------------------------------------


class KeptSetup(TypedDict):
    """A kernel's setup parts and how they ran in its current process."""

    parts: list[SetupPart]
    results: list[SetupResult]


class Restart(TypedDict):
    """A time the kernel's state was lost: a reset (or a restart through Jupyter's API), its
    process dying, or a rollback to a checkpoint; `after` is the highest execution number given
    out before it."""

    after: int
    time: float
    cause: Literal["reset", "died", "rollback"]
    reason: str | None  # how the process ended, for a death; which checkpoint, for a rollback


class _KernelStartBase(TypedDict):
    id: str
    name: str | None
    lifetime: Lifetime
    kernel_spec: str | None
    cwd: str | None
    # When loomgate began recording a kernel it did not start; None for one it started.
    attached: float | None
    sandbox: Sandbox | None  # the profile it runs under; None for one loomgate did not start


class KernelStart(_KernelStartBase, total=False):
    """What a kernel's records begin with: which kernel, and what it was started as."""

    open_to_agents: bool  # whether a model may use it (wire.Kernel's field); absent: no
    forked_from: ForkedFrom | None  # a fork's origin (wire.Kernel's field); absent: not a fork


class _KernelMetaBase(TypedDict):
    id: str
    name: str | None
    lifetime: Lifetime
    kernel_spec: str | None
    cwd: str | None
    created: float
    ended: float | None  # None while the kernel is live (or left running by a gateway)
    last_number: int  # the highest execution number ever given out


class KernelMeta(_KernelMetaBase, total=False):
    """kernel.json: the kernel's start, its life so far, and what a gone kernel's model shows."""

    attached: float | None  # as in KernelStart; absent in files of the first gateways
    implementation: str  # the kernel's language implementation ("ipython"), once it answered
    end_reason: str | None  # why it is gone when nobody stopped it, or why not taken back yet
    paths: list[str]  # the Jupyter session paths (notebooks, consoles) that use it
    setup: KeptSetup
    sandbox: Sandbox | None  # the profile it runs under; absent: from before sandboxes
    language_info: dict[str, object]  # as its kernel_info reply gave it, once it answered
    restarts: list[Restart]  # absent: none yet, or from before restarts were noted
    forked_from: ForkedFrom | None  # a fork's origin; absent: not a fork
    late_output: bool  # it publishes a cell's output after the cell's idle (seen once)
    # Whether a model may use it; absent in files of earlier gateways: then, whether it is
    # confined (kernels they started under `none` were the person's).
    open_to_agents: bool


def new_kernel_meta(start: KernelStart, created: float) -> KernelMeta:
    """Return the kernel.json of a kernel that starts now (its keys in the order of old)."""
    meta = KernelMeta(
        id=start["id"],
        name=start["name"],
        lifetime=start["lifetime"],
        kernel_spec=start["kernel_spec"],
        cwd=start["cwd"],
        attached=start["attached"],
        created=created,
        ended=None,
        last_number=0,
    )
    sandbox = start.get("sandbox")
    if sandbox is not None:  # absent otherwise: the file keeps the shape older gateways read
        meta["sandbox"] = sandbox
    opened = start.get("open_to_agents", False)
    if opened != open_to_agents(meta):  # written only where the older reading would differ
        meta["open_to_agents"] = opened
    forked_from = start.get("forked_from")
    if forked_from is not None:  # absent otherwise, as for sandboxes
        meta["forked_from"] = forked_from
    return meta


def open_to_agents(meta: KernelMeta) -> bool:
    """Return whether a model may use the kernel `meta` describes (KernelMeta.open_to_agents)."""
    opened = meta.get("open_to_agents")
    if opened is not None:
        return opened
    sandbox = meta.get("sandbox")
    return sandbox is not None and sandbox["profile"] != "none"


def read_kernel_meta(directory: Path) -> KernelMeta:
    """Return the kernel.json in `directory` (OSError, or ValueError for a file cut short)."""
    meta: KernelMeta = json.loads((directory / KERNEL_FILE).read_text(encoding="utf-8"))
    return meta


# -- record.json ------------------------------------------------------------------------------


class RecordDetails(TypedDict, total=False):
    """What a change of state may note besides the state: a pending input, a death, a note."""

    input: InputRequest | None
    died: Death | None
    note: str | None
    sandbox_failure: SandboxFailure


class _RecordMetaBase(TypedDict):
    kernel_id: str
    number: int
    msg_id: str
    code: str
    source: Source
    client: str | None
    state: ExecutionState
    started: float
    finished: float | None
    error: ErrorInfo | None
    input: InputRequest | None
    died: Death | None
    note: str | None
    unstored: Unstored | None  # absent in records from before it existed: read as None
    gaps: list[Gap]  # absent in records from before it existed: read as []


class RecordMeta(_RecordMetaBase, total=False):
    """record.json: one execution's metadata (its output lives in the stream files beside it)."""

    # When the last interrupt was sent to the kernel while this execution ran.
    interrupt_requested: float
    # Each stream's final size, noted when a finished record closes its streams.
    streams: dict[StreamName, StreamSize]
    # When output last arrived, as of the last save (the live value is the record's own).
    last_output: float
    # The sandbox rule the cell ran into, when its kernel is confined and it did.
    sandbox_failure: SandboxFailure


def new_record_meta(
    kernel_id: str,
    number: int,
    msg_id: str,
    code: str,
    source: Source,
    client: str | None,
    started: float,
) -> RecordMeta:
    """Return the record.json of an execution that starts running now."""
    return RecordMeta(
        kernel_id=kernel_id,
        number=number,
        msg_id=msg_id,
        code=code,
        source=source,
        client=client,
        state="running",
        started=started,
        finished=None,
        error=None,
        input=None,
        died=None,
        note=None,
        unstored=None,
        gaps=[],
    )


def read_record_meta(directory: Path) -> RecordMeta:
    """Return the record.json in `directory`, with the keys older records lack filled in
    (OSError, or ValueError for a file cut short)."""
    meta: RecordMeta = json.loads((directory / RECORD_FILE).read_text(encoding="utf-8"))
    meta.setdefault("unstored", None)
    meta.setdefault("gaps", [])
    return meta


def note_details(meta: RecordMeta, details: RecordDetails) -> None:
    """Store the `details` given in `meta` (a key left out keeps its value)."""
    if "input" in details:
        meta["input"] = details["input"]
    if "died" in details:
        meta["died"] = details["died"]
    if "note" in details:
        meta["note"] = details["note"]
    if "sandbox_failure" in details:
        meta["sandbox_failure"] = details["sandbox_failure"]
