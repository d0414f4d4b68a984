"""The tools' structured results, built from the wire shapes they report."""

from __future__ import annotations

from typing import get_type_hints

from loomgate.shared import wire
from loomgate.translator.mcp_server.results import (
    CellResult,
    KernelInfo,
    ReadResult,
    SearchResult,
    StatusResult,
    UnattachedKernel,
)
from tests.support.wire_values import kernel

SIZES = {name: wire.StreamSize(lines=0, bytes=0) for name in wire.STREAMS}
EXECUTION = wire.Execution(
    kernel_id="k1",
    number=3,
    state="awaiting_input",
    source="loomgate",
    client=None,
    code="input()",
    started=1.0,
    finished=None,
    elapsed=2.34567,
    error={"name": "ValueError", "value": "bad"},
    input={"prompt": "name? ", "password": False},
    died=None,
    note=None,
    unstored=None,
    gaps=[],
    last_output=1.5,
    silent_for=0.0,
    streams={**SIZES, "combined": wire.StreamSize(lines=7, bytes=70)},
    rich=[],
)


def test_an_unattached_kernel_has_the_fields_of_the_wire_shape() -> None:
    fields = {name: field.annotation for name, field in UnattachedKernel.model_fields.items()}
    assert fields == get_type_hints(wire.UpstreamKernel)


def test_a_cell_result_is_built_from_the_execution() -> None:
    model = CellResult.of(EXECUTION, "input", output_lines=7, omitted_lines=2, images=1)
    assert model.model_dump() == {
        "kernel": "k1",
        "execution": 3,
        "state": "awaiting_input",
        "elapsed_seconds": 2.346,
        "returned": "input",
        "error": "ValueError: bad",
        "output_lines": 7,
        "omitted_lines": 2,
        "input_prompt": "name? ",
        "images": 1,
        "sandbox_rule": None,
    }
    ended = wire.Execution(**{**EXECUTION, "error": None, "input": None, "state": "completed"})
    model = CellResult.of(ended, "final", output_lines=0, omitted_lines=0, images=0)
    assert (model.error, model.input_prompt, model.state) == (None, None, "completed")


def test_a_cell_result_names_the_sandbox_rule_the_cell_broke() -> None:
    broken = wire.Execution(
        **{**EXECUTION, "state": "error"},
        sandbox_failure=wire.SandboxFailure(rule="network", profile="strict", path=None),
    )
    model = CellResult.of(broken, "final", output_lines=0, omitted_lines=0, images=0)
    assert model.sandbox_rule == "network"


def test_a_kernel_reports_its_profile() -> None:
    confined = kernel(
        sandbox=wire.Sandbox(
            profile="strict",
            writable=[],
            hidden=[],
            network=False,
            memory=None,
            processes=None,
            mechanism="bubblewrap",
        )
    )
    assert KernelInfo.of(confined, "local").sandbox == "strict"
    assert KernelInfo.of(kernel(sandbox=None), "local").sandbox is None
    old = kernel()
    del old["sandbox"]  # type: ignore[misc]  # a gateway from before sandboxes
    assert KernelInfo.of(old, "old").sandbox is None


def test_a_status_result_counts_the_lines_of_each_stream() -> None:
    kernel = KernelInfo(
        id="k1",
        name=None,
        state="busy",
        lifetime="persistent",
        kernel_spec="python3",
        executions=3,
        current_execution=3,
        gateway="local",
    )
    model = StatusResult.of(kernel, EXECUTION)
    assert (model.execution, model.state, model.elapsed_seconds) == (3, "awaiting_input", 2.346)
    assert model.streams == {**{name: 0 for name in wire.STREAMS}, "combined": 7}


def test_a_read_result_holds_the_shown_lines() -> None:
    lines = [wire.Line(n=4, text="four"), wire.Line(n=5, text="fi", clipped=3)]
    read = wire.StreamRead(
        number=3,
        state="completed",
        stream="stdout",
        total=9,
        range="4:",
        first=4,
        last=9,
        truncated=True,
        lines=[*lines, wire.Line(n=6, text="six")],
    )
    model = ReadResult.of("k1", "stdout", read, lines, "6:")
    assert (model.first, model.lines, model.clipped, model.read_on) == (
        4,
        ["four", "fi"],
        {5: 3},
        "6:",
    )
    assert ReadResult.of("k1", "stdout", read, [], None).first == 4


def test_a_search_result_marks_the_matching_lines() -> None:
    group = wire.SearchGroup(
        execution=2,
        lines=[
            wire.SearchLine(n=10, text="before", marker="C"),
            wire.SearchLine(n=11, text="hit", marker="M"),
        ],
    )
    reply = wire.SearchReply(
        query="hit",
        mode="literal",
        stream="combined",
        matches=2,
        truncated=False,
        groups=[group, group],
        searched=2,
        execution=None,
    )
    model = SearchResult.of("k1", "hit", reply, [group], not_shown=1)
    assert model.model_dump() == {
        "kernel": "k1",
        "query": "hit",
        "mode": "literal",
        "matches": 2,
        "truncated": False,
        "groups": [{"execution": 2, "first": 10, "lines": ["before", "hit"], "matches": [11]}],
        "not_shown": 1,
    }
