"""The sandbox rule an ending cell ran into: the memory limit, a connection the proxy refused, or
what the cell's error and printed lines show, read from its record (the last lines only), with
refusals counted from shortly before the cell's record opened."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.sandbox.confinement.launch import sandbox_wire
from loomgate.gateway.sandbox.failures.cell_failures import (
    FAILURE_LINES,
    OPENED_LATE,
    cell_began,
    cell_failure,
    record_failure,
)
from loomgate.gateway.sandbox.network.network_rules import NetworkRefusal
from loomgate.shared.wire import SandboxFailure
from tests.gateway.sandbox.test_rule_failures import EROFS, WS, H, P
from tests.support.records import kernel_store

REFUSAL = NetworkRefusal(
    "127.0.0.1 is a loopback address, which profile 'workspace' does not name",
    "workspace",
    None,
    "127.0.0.1",
    9,
)
OOM = {"reason": "killed: memory limit 4 GiB reached", "cause": "memory_limit", "restarted": True}
# The same words without the cause (a record's before causes): the words decide nothing.
OOM_WORDS_ONLY = {"reason": "killed: memory limit 4 GiB reached", "restarted": True}
DENIED = f"cat: {H}/.ssh/k: Permission denied"


def failure_of_cell(
    error: tuple[str, str] | None, output: str, refused: list[NetworkRefusal], died: Any
) -> SandboxFailure | None:
    """Return the rule a cell of a bubblewrap kernel under WS, working in P, ran into."""
    return cell_failure(
        sandbox_wire(WS, "bubblewrap"),
        died=died,
        error={"name": error[0], "value": error[1]} if error else None,
        output=output,
        cwd=Path(P),
        own_tmp=True,
        refused=refused,
    )


@pytest.mark.parametrize(
    ("case", "error", "output", "refused", "died", "rule"),
    [
        ("a refusal the cell got over", None, "fetched from the mirror", [REFUSAL], None, None),
        ("a refusal curl printed", None, f"{REFUSAL.reason}\n", [REFUSAL], None, "network"),
        (
            "a refusal a command failed on",
            None,
            "curl: (56) CONNECT tunnel failed, response 403",
            [REFUSAL],
            None,
            "network",
        ),
        (
            "a refusal the cell raised on",
            ("ProxyError", "Tunnel connection failed: 403"),
            "",
            [REFUSAL],
            None,
            "network",
        ),
        ("a warning only", None, f"/x.py:1: UserWarning: {EROFS} '{H}/z'", [], None, None),
        ("a command's error", None, DENIED, [], None, "hidden"),
        ("the memory limit's kill", None, "", [], OOM, "memory"),
        ("its words without its cause", None, "", [], OOM_WORDS_ONLY, None),
        ("nothing printed", None, "", [], None, None),
    ],
)
def test_cell_failure_notes_only_failures(
    case: str,
    error: tuple[str, str] | None,
    output: str,
    refused: list[NetworkRefusal],
    died: Any,
    rule: str | None,
) -> None:
    found = failure_of_cell(error, output, refused, died)
    assert (found["rule"] if found else None) == rule, case
    if rule == "network":
        assert found is not None and found["path"] == "127.0.0.1:9"


def store_of(directory: Path, mechanism: str | None) -> RecordStore:
    """Return the records of a kernel under profile WS, confined by `mechanism` ("": by none;
    None: a kernel whose sandbox loomgate did not choose)."""
    sandbox = sandbox_wire(WS, mechanism) if mechanism is not None else None
    return kernel_store(directory, cwd=P, sandbox=sandbox)


@pytest.mark.parametrize(
    ("case", "mechanism", "printed", "rule"),
    [
        ("a command's error on stdout (`!cat`)", "bubblewrap", [("stdout", DENIED)], "hidden"),
        ("a subprocess's error on stderr", "landlock", [("stderr", DENIED)], "hidden"),
        ("the same in a kernel no mechanism confines", "", [("stderr", DENIED)], None),
        ("the same in a kernel of the stock Jupyter API", None, [("stderr", DENIED)], None),
        ("nothing printed", "bubblewrap", [], None),
        (
            "the error long before the cell's last printed lines",
            "bubblewrap",
            [("stderr", DENIED)] + [("stdout", f"line {n}") for n in range(FAILURE_LINES)],
            None,
        ),
        (
            "the error among the cell's last printed lines",
            "bubblewrap",
            [("stdout", f"line {n}") for n in range(100)] + [("stderr", DENIED)],
            "hidden",
        ),
    ],
)
async def test_a_records_printed_lines_say_which_rule_it_ran_into(
    tmp_path: Path,
    case: str,
    mechanism: str | None,
    printed: list[tuple[str, str]],
    rule: str | None,
) -> None:
    store = store_of(tmp_path / "k", mechanism)
    record = store.new_record(number=1, msg_id="m", code="!cat", source="loomgate", client=None)
    for stream, text in printed:
        record.write_stream(stream, text + "\n")
    record.flush()
    found = record_failure(record, store, None, None)
    assert (found["rule"] if found else None) == rule, case


@pytest.mark.parametrize(
    ("case", "before_finished", "expected"),
    [
        ("the first cell", None, 100.0 - OPENED_LATE),
        ("a cell after one that ended long before", 50.0, 100.0 - OPENED_LATE),
        ("a cell right after the one before it ended", 99.8, 99.8),
    ],
)
def test_a_refusal_counts_for_a_cell_from_shortly_before_its_record_opened(
    tmp_path: Path, case: str, before_finished: float | None, expected: float
) -> None:
    store = store_of(tmp_path / "k", "bubblewrap")
    if before_finished is not None:
        before = store.new_record(number=1, msg_id="a", code="", source="loomgate", client=None)
        before.meta["finished"] = before_finished
    record = store.new_record(number=2, msg_id="b", code="", source="loomgate", client=None)
    record.meta["started"] = 100.0
    assert cell_began(record, store) == expected, case


# What the tests above leave open (each fails on a mutant of cell_failures.py that
# bench/mutation.py found alive without it): the whole failure, the cell's error and working
# dir passed on, and where the kernel's /tmp is.
@pytest.mark.parametrize(
    ("case", "error", "output", "refused", "died", "failure"),
    [
        ("the memory limit's kill", None, "", [], OOM,
         {"rule": "memory", "profile": "workspace", "path": None}),
        ("a refusal curl printed", None, REFUSAL.reason, [REFUSAL], None,
         {"rule": "network", "profile": "workspace", "path": "127.0.0.1:9"}),
        ("the error's value", ("PermissionError", f"[Errno 13] Permission denied: '{H}/.ssh/k'"),
         "", [], None, {"rule": "hidden", "profile": "workspace", "path": f"{H}/.ssh/k"}),
        ("the error's name", ("MemoryError", ""), "", [], None,
         {"rule": "memory", "profile": "workspace", "path": None}),
        ("a path relative to the kernel's working dir", None, "cat: ../.ssh/k: Permission denied",
         [], None, {"rule": "hidden", "profile": "workspace", "path": f"{H}/.ssh/k"}),
    ],
)  # fmt: skip
def test_the_whole_failure_of_a_cell(
    case: str,
    error: tuple[str, str] | None,
    output: str,
    refused: list[NetworkRefusal],
    died: Any,
    failure: dict[str, str | None],
) -> None:
    found = failure_of_cell(error, output, refused, died)
    assert found == failure, case


@pytest.mark.parametrize(("own_tmp", "claimed"), [(True, True), (False, False)])
def test_a_missing_host_tmp_path_is_claimed_only_where_the_kernels_tmp_is_its_own(
    own_tmp: bool, claimed: bool
) -> None:
    with tempfile.NamedTemporaryFile(prefix="loomgate-host-tmp-", dir="/tmp") as host:
        found = cell_failure(
            sandbox_wire(WS, "landlock"),
            died=None,
            error=None,
            output=f"cat: {host.name}: No such file or directory",
            cwd=Path(P),
            own_tmp=own_tmp,
        )
        expected = {"rule": "own_tmp", "profile": "workspace", "path": host.name}
        assert found == (expected if claimed else None)


class Launch:
    """A kernel's sandbox as record_failure() reads it: its confiner's /tmp, and its proxy's
    refusals since the time asked (recorded)."""

    def __init__(self, own_tmp: bool, refused: list[NetworkRefusal]) -> None:
        self.confiner = type("Confiner", (), {"own_tmp": own_tmp})()
        self.refused = refused
        self.asked: list[float] = []

    def network_refusals(self, since: float) -> list[NetworkRefusal]:
        self.asked.append(since)
        return self.refused


def record_printing(tmp_path: Path, *lines: str) -> tuple[RecordStore, Any]:
    """Return a confined kernel's store and a record of a cell that printed `lines` (in a
    running event loop: a record flushes its output on a timer)."""
    store = store_of(tmp_path / "k", "bubblewrap")
    record = store.new_record(number=1, msg_id="m", code="!x", source="loomgate", client=None)
    for line in lines:
        record.write_stream("stdout", line + "\n")
    record.flush()
    return store, record


async def test_a_records_failure_reads_its_death_its_error_and_its_lines_as_printed(
    tmp_path: Path,
) -> None:
    store, record = record_printing(tmp_path, DENIED, "done")  # the error line, then another
    assert record_failure(record, store, None, None) == {
        "rule": "hidden",
        "profile": "workspace",
        "path": f"{H}/.ssh/k",
    }
    assert record_failure(record, store, OOM, None) == {  # type: ignore[arg-type]
        "rule": "memory",
        "profile": "workspace",
        "path": None,
    }
    store, record = record_printing(tmp_path / "2")
    record.meta["error"] = {"name": "OSError", "value": f"{EROFS} '{P}/.git/hooks/x'"}
    found = record_failure(record, store, None, None)
    assert found == {"rule": "protected", "profile": "workspace", "path": f"{P}/.git/hooks/x"}


async def test_a_records_relative_paths_are_read_in_the_kernels_working_dir(tmp_path: Path) -> None:
    store, record = record_printing(tmp_path, "touch: cannot touch '.git/hooks/x': " + EROFS[11:-1])
    found = record_failure(record, store, None, None)
    assert found == {"rule": "protected", "profile": "workspace", "path": f"{P}/.git/hooks/x"}


async def test_a_records_tmp_is_its_own_unless_its_confiner_says_not(tmp_path: Path) -> None:
    with tempfile.NamedTemporaryFile(prefix="loomgate-host-tmp-", dir="/tmp") as host:
        store, record = record_printing(tmp_path, f"cat: {host.name}: No such file or directory")
        found = record_failure(record, store, None, None)  # no launch: bubblewrap's own /tmp
        assert found == {"rule": "own_tmp", "profile": "workspace", "path": host.name}
        landlock = Launch(own_tmp=False, refused=[])
        assert record_failure(record, store, None, landlock) is None  # type: ignore[arg-type]


async def test_a_records_refusals_are_its_proxys_since_the_cell_began(tmp_path: Path) -> None:
    store, record = record_printing(tmp_path, REFUSAL.reason)
    launch = Launch(own_tmp=True, refused=[REFUSAL])
    found = record_failure(record, store, None, launch)  # type: ignore[arg-type]
    assert found == {"rule": "network", "profile": "workspace", "path": "127.0.0.1:9"}
    assert launch.asked == [cell_began(record, store)]


async def test_the_proxy_is_asked_for_a_cell_that_raised_or_printed_only(tmp_path: Path) -> None:
    store, raised_silently = record_printing(tmp_path / "a")
    raised_silently.meta["error"] = {"name": "ConnectionError", "value": "refused"}
    launch = Launch(own_tmp=True, refused=[REFUSAL])
    found = record_failure(raised_silently, store, None, launch)  # type: ignore[arg-type]
    assert found == {"rule": "network", "profile": "workspace", "path": "127.0.0.1:9"}
    assert launch.asked == [cell_began(raised_silently, store)]
    store, quiet = record_printing(tmp_path / "b")  # neither raised nor printed: most cells
    launch = Launch(own_tmp=True, refused=[REFUSAL])
    assert record_failure(quiet, store, None, launch) is None  # type: ignore[arg-type]
    assert launch.asked == []


async def test_a_programs_name_written_apart_is_read_with_its_message(tmp_path: Path) -> None:
    # coreutils writes "rm: " before its message, and a subprocess's stderr may reach IOPub in
    # two parts: the cell's traceback between them.
    store = store_of(tmp_path / "k", "bubblewrap")
    record = store.new_record(number=1, msg_id="m", code="!x", source="loomgate", client=None)
    program, message = "rm:", "cannot remove '/etc/hostname': Read-only file system"
    record.write_stream("stderr", program + " ")
    record.write_error("CalledProcessError", "exit status 1", ["Traceback", "CalledProcessError"])
    record.write_stream("stderr", message + "\n")
    record.flush()
    printed = [line.text for line in record.log("combined").tail(10)]
    assert printed[0] == program + " " and printed[-1] == message  # as they came
    found = record_failure(record, store, None, None)
    assert found == {"rule": "read_only", "profile": "workspace", "path": "/etc/hostname"}
