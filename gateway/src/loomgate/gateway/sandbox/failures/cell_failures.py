"""The sandbox rule an ending cell of a confined kernel ran into, for its record: the memory limit
that ended it, a connection the kernel's proxy refused while it ran, or what its error and printed
lines show (sandbox/failures/rule_failures.py reads those). The execution tracker asks at every
cell's end, and again when output comes after it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from loomgate.gateway.records.output_log import Line, OutputKind
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.sandbox.confinement.launch import SandboxLaunch, rules_from_wire
from loomgate.gateway.sandbox.failures.rule_failures import PROGRAM_LINE, command_errors, failure_of
from loomgate.gateway.sandbox.network.network_rules import NetworkRefusal
from loomgate.shared import wire
from loomgate.shared.wire import SandboxFailure

# The last printed lines (stdout and stderr, in order) of a confined kernel's cell read for a
# rule it broke, found among the last OUTPUT_LINES of its output (a traceback's lines among them).
FAILURE_LINES = 40
OUTPUT_LINES = 160
PRINTED = frozenset({OutputKind.STDOUT, OutputKind.STDERR})
# A record opens when the gateway reads the cell's execute_input, which may be after the proxy,
# in the same event loop, refused the cell's first connection: refusals this much earlier count.
OPENED_LATE = 1.0


def record_failure(
    record: ExecutionRecord,
    store: RecordStore,
    died: wire.Death | None,
    launch: SandboxLaunch | None,
) -> SandboxFailure | None:
    """Return the sandbox rule an ending cell of `store`'s kernel ran into (None: none, or not
    confined): what its sandbox's proxy (`launch`'s) refused while it ran, else what its error
    and output show (`!cmd` writes its errors to stdout, a subprocess to stderr)."""
    sandbox = store.meta.get("sandbox")
    if not sandbox or not sandbox["mechanism"]:
        return None
    printed = printed_lines(record.log("combined").tail(OUTPUT_LINES))[-FAILURE_LINES:]
    error = record.meta["error"]
    refused: Sequence[NetworkRefusal] = ()
    if launch is not None and (error is not None or printed):  # else no refusal can count
        refused = launch.network_refusals(cell_began(record, store))
    return cell_failure(
        sandbox,
        died=died,
        error=error,
        output="\n".join(printed),
        cwd=Path(store.meta["cwd"] or Path.cwd()),
        own_tmp=launch is None or launch.confiner.own_tmp,
        refused=refused,
    )


def printed_lines(lines: Iterable[Line]) -> list[str]:
    """Return the stdout and stderr lines among `lines`; one that is only a program's name
    ("rm: ", which coreutils writes apart from its message) is joined to the printed line after
    it, which may have come after the cell's traceback."""
    printed: list[str] = []
    cut = False
    for line in lines:
        if line.tag not in PRINTED:
            continue
        if cut:
            printed[-1] += line.text
        else:
            printed.append(line.text)
        cut = PROGRAM_LINE.fullmatch(printed[-1]) is not None
    return printed


def cell_began(record: ExecutionRecord, store: RecordStore) -> float:
    """Return since when a connection the proxy refused is `record`'s: shortly before its
    record opened, but not before the cell before it ended."""
    before = store.get(record.number - 1)
    ended = before.meta["finished"] if before is not None else None
    return max(record.meta["started"] - OPENED_LATE, ended or 0.0)


def cell_failure(
    sandbox: wire.Sandbox,
    *,
    died: wire.Death | None,
    error: wire.ErrorInfo | None,
    output: str,
    cwd: Path,
    own_tmp: bool,
    refused: Sequence[NetworkRefusal] = (),
) -> SandboxFailure | None:
    """Return the sandbox rule an ending cell of a kernel confined as `sandbox` ran into: the
    memory limit that ended it, a connection its proxy `refused` while it ran (when the cell
    failed: it raised, a command in it failed, or it printed the proxy's refusal), or what its
    error and `output` (its stdout and stderr) show (`failure_of`)."""
    profile = sandbox["profile"]
    if died is not None and died.get("cause") == "memory_limit":
        return {"rule": "memory", "profile": profile, "path": None}
    shown = any(refusal.reason in output for refusal in refused)
    if error is None and not shown and not command_errors(output):  # no failure: most cells
        return None
    if refused:
        return {"rule": "network", "profile": profile, "path": refused[-1].destination}
    return failure_of(
        rules_from_wire(sandbox),
        error_name=error["name"] if error else None,
        error_value=error["value"] if error else None,
        output=output,
        cwd=cwd,
        own_tmp=own_tmp,
    )
