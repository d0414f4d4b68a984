"""Reads and searches of a cell's output at the edges, table-driven: what fits a reply's
budget (head and tail, read lines, search lines), a running cell's read, a single match, and
the call that reads on."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.shared import wire
from loomgate.translator.output_view import OutputLimits, SearchPage, chars_of, fit, lines_within
from loomgate.translator.presentation import (
    Audience,
    past_the_end,
    read_on,
    render_read,
    render_search,
)
from tests.support.wire_values import lines, read


def texts_of(kept: list[wire.Line]) -> list[str]:
    """Return the texts of kept lines."""
    return [line["text"] for line in kept]


# (id, head texts, tail texts, max_chars, head kept, tail kept); a line costs its text and 1.
FITS = [
    (
        "all that fits the limit is kept",
        ["aaaaaa", "aaaaaa"],
        ["bbbbb"],
        20,
        ["aaaaaa", "aaaaaa"],
        ["bbbbb"],
    ),
    (
        "over the limit, each half keeps what fits half of it",
        ["aaaa", "aaaa", "aaaa"],
        ["bbbbbbbbbbbb", "bb", "bb"],
        20,
        ["aaaa", "aaaa"],
        ["bb", "bb"],
    ),
    (
        "one character over the limit",
        ["aaaaaaaaa", "a"],
        ["bbbbbbbbb"],
        21,
        ["aaaaaaaaa"],
        ["bbbbbbbbb"],
    ),
    (
        "a line longer than half the limit is still kept",
        ["a" * 50],
        ["b" * 50],
        20,
        ["a" * 50],
        ["b" * 50],
    ),
]


@pytest.mark.parametrize(
    ("case", "head", "tail", "max_chars", "head_kept", "tail_kept"),
    FITS,
    ids=[c[0] for c in FITS],
)
def test_head_and_tail_fit_the_character_limit(
    case: str,
    head: list[str],
    tail: list[str],
    max_chars: int,
    head_kept: list[str],
    tail_kept: list[str],
) -> None:
    kept_head, kept_tail = fit(
        lines(*head), lines(*tail, start=100), OutputLimits(max_lines=10, max_chars=max_chars)
    )
    assert (texts_of(kept_head), texts_of(kept_tail)) == (head_kept, tail_kept)


# (texts, budget, least, texts kept); a line costs its text and 1.
WITHIN = [
    ("all fit", ["aaaa", "bbbb"], 100, 0, ["aaaa", "bbbb"]),
    ("exactly the budget", ["aaaa", "bbbb"], 10, 0, ["aaaa", "bbbb"]),
    ("one character short", ["aaaa", "bbbb"], 9, 0, ["aaaa"]),
    ("none fits", ["aaaa", "bbbb"], 4, 0, []),
    ("at least one, over the budget", ["aaaa", "bbbb"], 4, 1, ["aaaa"]),
    ("at least two, over the budget", ["aaaa", "bbbb", "cccc"], 4, 2, ["aaaa", "bbbb"]),
    ("at least one that fits, then the budget", ["aaaa", "bbbb", "cc"], 10, 1, ["aaaa", "bbbb"]),
    ("empty lines cost their newline", ["", "", ""], 2, 0, ["", ""]),
    ("no lines", [], 10, 1, []),
]


@pytest.mark.parametrize(
    ("case", "texts", "budget", "least", "kept"), WITHIN, ids=[c[0] for c in WITHIN]
)
def test_the_first_lines_within_a_budget(
    case: str, texts: list[str], budget: int, least: int, kept: list[str]
) -> None:
    assert texts_of(lines_within(lines(*texts), budget, least)) == kept


def test_by_default_no_line_past_the_budget_is_kept() -> None:
    assert lines_within(lines("aaaa", "b"), 4) == []


@pytest.mark.parametrize(("texts", "chars"), [([], 0), ([""], 1), (["ab", "cde"], 7), (["…"], 2)])
def test_lines_take_their_text_and_a_newline(texts: list[str], chars: int) -> None:
    assert chars_of(lines(*texts)) == chars


def test_the_tail_keeps_its_last_lines_in_order() -> None:
    _, tail = fit([], lines("1", "2", "3", "4", start=7), OutputLimits(max_lines=4))
    assert [line["n"] for line in tail] == [9, 10]


def group(execution: int, *specs: tuple[int, str, str]) -> wire.SearchGroup:
    """Return a search group of (n, text, marker) lines."""
    found = [wire.SearchLine(n=n, text=text, marker=marker) for n, text, marker in specs]  # type: ignore[typeddict-item]
    return wire.SearchGroup(execution=execution, lines=found)


def shown(page: SearchPage) -> list[tuple[int, list[int]]]:
    """Return the (execution, line numbers) a page shows."""
    return [(g["execution"], [line["n"] for line in g["lines"]]) for g in page.groups]


@pytest.mark.parametrize(
    ("budget", "kept", "left_out", "next_match"),
    [(40, [(3, [123456, 123457])], 0, None), (39, [(3, [123456])], 1, (3, 123457))],
)
def test_a_search_line_costs_its_number_too(
    budget: int, kept: list[tuple[int, list[int]]], left_out: int, next_match: Any
) -> None:
    groups = [group(3, (123456, "x" * 10, "M"), (123457, "x" * 10, "M"))]  # 20 each
    page = SearchPage.within(groups, budget)
    assert (shown(page), page.left_out, page.next_match) == (kept, left_out, next_match)


def test_every_match_past_the_budget_is_counted() -> None:
    groups = [group(1, (1, "m" * 20, "M"), (2, "m", "M"), (3, "c", "C"), (4, "m", "M"))]
    page = SearchPage.within(groups, 10)
    assert (shown(page), page.left_out, page.next_match) == ([(1, [1])], 2, (1, 2))
    assert page.clipped == {(1, 1): 10}


def test_lines_that_fit_are_not_marked_clipped() -> None:
    page = SearchPage.within([group(1, (1, "short", "M"))], 100)
    assert page.clipped == {}


def reply(matches: int, groups: list[wire.SearchGroup]) -> wire.SearchReply:
    """Return a search reply for 'm' in the combined stream."""
    return {  # type: ignore[typeddict-item]
        "query": "m",
        "mode": "literal",
        "stream": "combined",
        "matches": matches,
        "truncated": False,
        "groups": groups,
        "searched": 1,
    }


@pytest.mark.parametrize(
    ("audience", "call"),
    [
        ("model", 'read_output(execution=2, lines="9:9")'),
        ("person", "`loomgate output 2 --lines 9:9`"),
    ],
)
def test_one_match_and_one_left_out(audience: Audience, call: str) -> None:
    groups = [group(2, (1, "m" * 8, "M")), group(2, (9, "m" * 8, "M"))]
    page = SearchPage.within(groups, 15)
    assert render_search(reply(1, groups), "In [2]", page, audience).split("\n") == [
        "1 match for 'm' (literal) in In [2] combined:",
        "In [2]:",
        "M 1│mmmmmmmm",
        f"… 1 more match not shown (the reply is full); the next is In [2] line 9: {call}",
    ]


@pytest.mark.parametrize(
    ("state", "header"),
    [
        ("running", "In [3] stdout, lines 1–2 of 2 (still running):"),
        ("awaiting_input", "In [3] stdout, lines 1–2 of 2 (still running):"),
        ("completed", "In [3] stdout, lines 1–2 of 2:"),
        ("interrupted", "In [3] stdout, lines 1–2 of 2:"),
    ],
)
def test_a_read_of_a_running_cell_says_so(state: str, header: str) -> None:
    response = read(state=state, total=2, range="1:2", first=1, last=2, lines=lines("a", "b"))
    assert render_read(response).split("\n") == [header, "1│a", "2│b"]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"first": 5, "last": 10, "range": "5:10", "truncated": True}, "5:10"),
        ({"first": 5, "last": 10, "range": "5:", "truncated": True}, "5:"),
        ({"first": 1, "last": 0, "range": "1:", "truncated": False}, None),
        ({"first": 8, "last": 7, "range": "8:20", "truncated": False}, None),
    ],
)
def test_nothing_shown_reads_on_from_the_first_line(
    fields: dict[str, Any], expected: str | None
) -> None:
    assert read_on(read(**fields), []) == expected


@pytest.mark.parametrize(
    ("fields", "audience", "refusal"),
    [
        (
            {"total": 50, "range": "100:120"},
            "person",
            "In [3] stdout has 50 lines; lines 100:120 are past its end. "
            "`loomgate output 3 --stream stdout --lines -20:` reads its last 20 lines.",
        ),
        (
            {"total": 50, "range": "100:120"},
            "model",
            "In [3] stdout has 50 lines; lines 100:120 are past its end. "
            'read_output(execution=3, stream="stdout", lines="-20:") reads its last 20 lines.',
        ),
        (
            {"total": 2, "range": "1:2", "first": 1, "last": 2, "lines": lines("a", "b")},
            "model",
            None,
        ),
        ({"total": 0, "range": "1:2"}, "model", None),
        ({"total": 50, "range": "100:120", "state": "running"}, "model", None),
    ],
    ids=["past the end, person", "past the end, model", "lines found", "empty", "running"],
)
def test_a_read_past_the_end_of_a_finished_stream_is_refused(
    fields: dict[str, Any], audience: Audience, refusal: str | None
) -> None:
    """Only a range wholly past the end of a finished, non-empty stream is refused."""
    response = read(**fields)
    assert past_the_end(response, audience) == refusal
    if refusal is not None:
        assert render_read(response, audience=audience) == refusal
