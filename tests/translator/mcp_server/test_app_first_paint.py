"""The execution view's first page, cut from the output a cell result carried: what the gateway
gives view_execution (head 20, tail 40, lines clipped to 5,000), or nothing when it cannot."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.shared import wire
from loomgate.translator.mcp_server.app_first_paint import first_page


def numbered(first: int, last: int, **extra: Any) -> list[wire.Line]:
    """Return lines `first`..`last`, their text their number."""
    return [wire.Line(n=n, text=str(n), **extra) for n in range(first, last + 1)]


def carrying(head: list[wire.Line], tail: list[wire.Line], total: int) -> wire.Execution:
    """Return an execution whose `output` is this head and tail of `total` lines."""
    omitted = total - len(head) - len(tail)
    output = wire.OutputView(total=total, head=head, tail=tail, omitted=omitted)
    return {"number": 3, "state": "completed", "output": output}  # type: ignore[typeddict-item]


def ends(execution: dict[str, Any] | None) -> tuple[list[int], list[int], int] | None:
    """Return the line numbers of a page's head and tail, and what it omits (its total is the
    execution's: checked here)."""
    if execution is None:
        return None
    output = execution["output"]
    assert output["total"] == len(output["head"]) + len(output["tail"]) + output["omitted"]
    return [x["n"] for x in output["head"]], [x["n"] for x in output["tail"]], output["omitted"]


@pytest.mark.parametrize(
    ("execution", "expected"),
    [
        # All lines carried, as many as a page holds or fewer: all of them in its head.
        (carrying(numbered(1, 60), [], 60), (list(range(1, 61)), [], 0)),
        (carrying(numbered(1, 5), [], 5), ([1, 2, 3, 4, 5], [], 0)),
        (carrying([], [], 0), ([], [], 0)),
        # All carried (head and tail of the model's view meet), more than a page holds.
        (
            carrying(numbered(1, 100), numbered(101, 150), 150),
            (list(range(1, 21)), list(range(111, 151)), 90),
        ),
        (carrying(numbered(1, 61), [], 61), (list(range(1, 21)), list(range(22, 62)), 1)),
        # Lines left out between the model's head and tail: the page's ends come from them.
        (
            carrying(numbered(1, 100), numbered(401, 500), 500),
            (list(range(1, 21)), list(range(461, 501)), 440),
        ),
        (
            carrying(numbered(1, 20), numbered(461, 500), 500),
            (list(range(1, 21)), list(range(461, 501)), 440),
        ),
        # Too few lines carried for the page: nothing (the view asks for it).
        (carrying(numbered(1, 19), numbered(461, 500), 500), None),
        (carrying(numbered(1, 20), numbered(462, 500), 500), None),
    ],
)
def test_the_page_ends(execution: wire.Execution, expected: Any) -> None:
    assert ends(first_page(execution)) == expected


def test_no_output_carried_is_no_page() -> None:
    bare: Any = {"number": 1, "state": "running"}
    assert first_page(bare) is None


def test_the_page_keeps_the_rest_of_the_execution() -> None:
    execution = carrying(numbered(1, 2), [], 2)
    page = first_page(execution)
    assert page is not None and page is not execution
    assert {k: v for k, v in page.items() if k != "output"} == {"number": 3, "state": "completed"}
    assert execution["output"]["head"] == numbered(1, 2)  # the result's own is left as it was


def test_the_page_leaves_out_what_the_view_never_draws() -> None:
    execution: Any = carrying(numbered(1, 2), [], 2) | {
        "code": "1+1",
        "started": 1.0,
        "elapsed": 0.5,
        "finished": 1.5,
        "gaps": [],
        "last_output": 1.2,
        "silent_for": 0.3,
        "streams": {"stdout": {"lines": 2, "bytes": 4}},
    }
    page = first_page(execution)
    assert page is not None
    assert set(page) == {"number", "state", "code", "started", "elapsed", "output"}
    assert "streams" in execution  # the result's own execution is left whole


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ({"n": 1, "text": "x" * 5000}, {"n": 1, "text": "x" * 5000}),
        ({"n": 1, "text": "x" * 5001}, {"n": 1, "text": "x" * 5000, "clipped": 1}),
        # Clipped by the model's limit already: the view's clip adds to the count.
        (
            {"n": 1, "text": "x" * 20000, "clipped": 7, "kind": "result"},
            {"n": 1, "text": "x" * 5000, "clipped": 15007, "kind": "result"},
        ),
        ({"n": 1, "text": "x" * 5000, "clipped": 3}, {"n": 1, "text": "x" * 5000, "clipped": 3}),
        # Clipped shorter than the page's lines: the page cannot be made from it.
        ({"n": 1, "text": "x" * 4999, "clipped": 3}, None),
    ],
)
def test_lines_are_clipped_as_the_gateway_clips(line: Any, expected: Any) -> None:
    page = first_page(carrying([line], [], 1))
    assert (page["output"]["head"][0] if page else None) == expected


def test_a_clipped_line_in_the_tail_also_means_no_page() -> None:
    tail = [*numbered(461, 499), wire.Line(n=500, text="short", clipped=9)]
    assert first_page(carrying(numbered(1, 100), tail, 500)) is None


def test_other_page_sizes() -> None:
    execution = carrying(numbered(1, 100), numbered(401, 500), 500)
    assert ends(first_page(execution, head=2, tail=0)) == ([1, 2], [], 498)
    assert ends(first_page(execution, head=0, tail=3)) == ([], [498, 499, 500], 497)
    short = first_page(carrying([wire.Line(n=1, text="abcdef")], [], 1), max_chars=4)
    assert short is not None and short["output"]["head"] == [{"n": 1, "text": "abcd", "clipped": 2}]
