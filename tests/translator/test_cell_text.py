"""A finished cell as a terminal shows it (`loomgate run`, `loomgate show`), and the output view
a gateway's execution carries, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.shared import wire
from loomgate.translator.output_view import CellOutput, OutputLimits
from loomgate.translator.presentation import cell_text, render_cell
from tests.support.wire_values import execution, lines


def view(head: list[dict[str, Any]], tail: list[dict[str, Any]], total: int) -> wire.OutputView:
    """Return an execution's `output` field."""
    omitted = total - len(head) - len(tail)
    return wire.OutputView(total=total, head=head, tail=tail, omitted=omitted)


PNG_AT_2 = [{"index": 0, "line": 2, "mimetypes": ["image/png", "text/plain"]}]

CELL_TEXTS = [
    ("no output field", execution(), "In [5] (1.2 s):"),
    ("an empty output", execution(output=None), "In [5] (1.2 s):"),
    (
        "lines and a result",
        execution(output=view(lines("hello", ("+result", "42")), [], 2)),
        "In [5] (1.2 s):\nhello\nOut[5]: 42",
    ),
    (
        "an image is named, not shown",
        execution(
            rich=PNG_AT_2,
            output=view(lines("before", ("+rich", "<Figure>"), "after"), [], 3),
        ),
        "In [5] (1.2 s):\nbefore\n[image 0: image/png]\nafter",
    ),
    (
        "the omission names the command a person runs",
        execution(output=view(lines("a"), lines("z", start=10), 10)),
        "In [5] (1.2 s):\na\n… 8 lines omitted (2–9 of 10); `loomgate output 5 --lines 2:9` "
        "shows them …\nz",
    ),
]


@pytest.mark.parametrize(("case", "record", "expected"), CELL_TEXTS, ids=[c[0] for c in CELL_TEXTS])
def test_a_cell_as_a_terminal_shows_it(case: str, record: wire.Execution, expected: str) -> None:
    assert cell_text(record) == expected


def test_a_cell_text_for_the_model_and_within_limits() -> None:
    record = execution(output=view(lines("a", "b", "c", "d"), [], 4))
    assert cell_text(record, OutputLimits(max_lines=2), "model") == (
        'In [5] (1.2 s):\na\n… 3 lines omitted (2–4 of 4); read_output(execution=5, lines="2:4") '
        "shows them …"
    )


@pytest.mark.parametrize(
    ("output", "head", "tail", "total", "omitted"),
    [
        (None, [], [], 0, 0),
        (view(lines("a", "b"), [], 2), lines("a", "b"), [], 2, 0),
        (view(lines("a"), lines("z", start=9), 9), lines("a"), lines("z", start=9), 9, 7),
    ],
)
def test_the_output_view_of_a_gateways_execution(
    output: wire.OutputView | None,
    head: list[dict[str, Any]],
    tail: list[dict[str, Any]],
    total: int,
    omitted: int,
) -> None:
    shown = CellOutput.from_gateway(output)
    assert (list(shown.head), list(shown.tail), shown.total, shown.omitted) == (
        head,
        tail,
        total,
        omitted,
    )


@pytest.mark.parametrize("total", [0, 1, 2, 150, 5000])
def test_full_output_shows_every_line(total: int) -> None:
    texts = [f"line {i} " + "x" * 300 for i in range(1, total + 1)]
    output = CellOutput(lines(*texts), [], total)
    blocks = render_cell(execution(), output, output.limits_to_keep_all())
    assert blocks == ["\n".join(["In [5] (1.2 s):", *texts])]


@pytest.mark.parametrize(("total", "max_lines"), [(0, 2), (1, 2), (2, 4), (40, 80)])
def test_full_output_limits_keep_head_and_tail_whole(total: int, max_lines: int) -> None:
    limits = CellOutput((), (), total).limits_to_keep_all()
    assert limits.max_lines == max_lines
    assert limits.max_chars >= 1 << 62
