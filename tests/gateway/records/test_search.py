"""Tests for searching a LineLog."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from loomgate.gateway.records.output_log import LineLog
from loomgate.gateway.records.search import (
    Hit,
    LogMatches,
    Matcher,
    RecordMatches,
    SearchError,
    SearchMode,
    SearchTimeout,
    search_log,
    search_records,
)

SMALL = [
    "alpha one",  # 1
    "beta two",  # 2
    "gamma three",  # 3
    "Alpha four",  # 4
    "delta five",  # 5
    "epsilon six",  # 6
    "zeta alpha alpha",  # 7
    "eta",  # 8
    "straße",  # 9
    "theta f(0)",  # 10
    "call f(x",  # 11
]
PENDING = "pending alpha"  # 12


@pytest.fixture
def small(tmp_path: Path) -> LineLog:
    """Return a log of SMALL with PENDING as its unfinished line."""
    log = LineLog(tmp_path / "small")
    log.append(SMALL[:5])
    log.append(SMALL[5:])
    log.set_pending(PENDING)
    return log


def shape(result: LogMatches) -> list[list[tuple[int, str]]]:
    """Return each group as (line number, marker) pairs."""
    return [[(hit.number, hit.marker) for hit in group] for group in result.groups]


# (id, query, mode, ignore_case, context, max_matches, groups, truncated)
CASES: list[tuple[str, str, SearchMode, bool, int, int, list[list[tuple[int, str]]], bool]] = [
    ("literal", "alpha", "literal", False, 0, 50, [[(1, "M")], [(7, "M")], [(12, "M")]], False),
    (
        "literal ignoring case",
        "ALPHA",
        "literal",
        True,
        0,
        50,
        [[(1, "M")], [(4, "M")], [(7, "M")], [(12, "M")]],
        False,
    ),
    (
        "context one",
        "alpha",
        "literal",
        False,
        1,
        50,
        [[(1, "M"), (2, "C")], [(6, "C"), (7, "M"), (8, "C")], [(11, "C"), (12, "M")]],
        False,
    ),
    (
        "overlapping context merges",
        "alpha",
        "literal",
        True,
        2,
        50,
        [[(n, "M" if n in (1, 4, 7, 12) else "C") for n in range(1, 13)]],
        False,
    ),
    (
        "adjacent matches form one group",
        "^(beta|gamma)",
        "regex",
        False,
        0,
        50,
        [[(2, "M"), (3, "M")]],
        False,
    ),
    (
        "adjacent context merges",
        "^(beta|delta)",
        "regex",
        False,
        1,
        50,
        [[(1, "C"), (2, "M"), (3, "C"), (4, "C"), (5, "M"), (6, "C")]],
        False,
    ),
    (
        "gap of one line splits groups",
        "^(beta|epsilon)",
        "regex",
        False,
        1,
        50,
        [[(1, "C"), (2, "M"), (3, "C")], [(5, "C"), (6, "M"), (7, "C")]],
        False,
    ),
    ("truncated", "alpha", "literal", True, 0, 2, [[(1, "M")], [(4, "M")]], True),
    (
        "truncated with context",
        "alpha",
        "literal",
        True,
        3,
        3,
        [[(n, "M" if n in (1, 4, 7) else "C") for n in range(1, 11)]],
        True,
    ),
    (
        "limit equal to matches",
        "alpha",
        "literal",
        False,
        0,
        3,
        [[(1, "M")], [(7, "M")], [(12, "M")]],
        False,
    ),
    (
        "regex anchors are per line",
        "e$",
        "regex",
        False,
        0,
        50,
        [[(1, "M")], [(3, "M")], [(5, "M")], [(9, "M")]],
        False,
    ),
    ("regex ignoring case", "^ALPHA", "regex", True, 0, 50, [[(1, "M")], [(4, "M")]], False),
    ("auto as regex", "t[wh]", "auto", False, 0, 50, [[(2, "M"), (3, "M")], [(10, "M")]], False),
    ("auto falls back to literal", "f(", "auto", False, 0, 50, [[(10, "M"), (11, "M")]], False),
    # A valid regex whose text is not what it matches as a regex: the text still counts.
    ("auto finds code as typed", "f(0)", "auto", False, 0, 50, [[(10, "M")]], False),
    ("regex reads code as a group", "f(0)", "regex", False, 0, 50, [], False),
    (
        "auto: the text or the regex",
        "a.p",
        "auto",
        False,
        0,
        50,
        [[(1, "M")], [(7, "M")], [(12, "M")]],
        False,
    ),
    ("literal dot is literal", "a.p", "literal", False, 0, 50, [], False),
    ("regex dot", "a.p", "regex", False, 0, 50, [[(1, "M")], [(7, "M")], [(12, "M")]], False),
    ("casefolded literal", "STRASSE", "literal", True, 0, 50, [[(9, "M")]], False),
    ("literal never spans lines", "one\nbeta", "literal", False, 0, 50, [], False),
    ("regex never spans lines", r"one\sbeta", "regex", False, 0, 50, [], False),
    ("only the pending line", "pending", "auto", False, 1, 50, [[(11, "C"), (12, "M")]], False),
    ("no match", "omega", "auto", False, 2, 50, [], False),
]


@pytest.mark.parametrize(
    ("query", "mode", "ignore_case", "context", "max_matches", "groups", "truncated"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_search(
    small: LineLog,
    query: str,
    mode: SearchMode,
    ignore_case: bool,
    context: int,
    max_matches: int,
    groups: list[list[tuple[int, str]]],
    truncated: bool,
) -> None:
    matcher = Matcher.build(query, mode, ignore_case)
    result = search_log(small, matcher, context=context, max_matches=max_matches)
    assert shape(result) == groups
    assert result.matches == sum(marker == "M" for group in groups for _, marker in group)
    assert result.truncated is truncated
    every = [*SMALL, PENDING]
    assert all(hit.text == every[hit.number - 1] for group in result.groups for hit in group)


# (query, requested mode, resolved mode)
MODES: list[tuple[str, SearchMode, str]] = [
    ("a.c", "auto", "literal or regex"),
    ("f(0)", "auto", "literal or regex"),
    ("plain", "auto", "literal"),
    ("two words", "auto", "literal"),
    ("f(", "auto", "literal"),
    ("[unclosed", "auto", "literal"),
    ("a.c", "literal", "literal"),
    ("f(", "literal", "literal"),
    ("a.c", "regex", "regex"),
]


@pytest.mark.parametrize(("query", "mode", "resolved"), MODES)
def test_matcher_mode(query: str, mode: SearchMode, resolved: str) -> None:
    matcher = Matcher.build(query, mode)
    assert (matcher.query, matcher.mode) == (query, resolved)


# (query, mode, words the message must contain)
BAD_QUERIES: list[tuple[str, SearchMode, list[str]]] = [
    ("", "auto", ["empty"]),
    ("", "literal", ["empty"]),
    ("", "regex", ["empty"]),
    ("f(", "regex", ["'f('", "missing )"]),
    ("a{2,1}", "regex", ["'a{2,1}'"]),
]


@pytest.mark.parametrize(("query", "mode", "words"), BAD_QUERIES)
def test_matcher_rejects(query: str, mode: SearchMode, words: list[str]) -> None:
    with pytest.raises(SearchError) as raised:
        Matcher.build(query, mode)
    assert all(word in str(raised.value) for word in words)
    assert not isinstance(raised.value, SearchTimeout)


@pytest.mark.parametrize(
    ("context", "max_matches", "words"),
    [(0, 0, "max_matches"), (0, -3, "max_matches"), (-1, 5, "context")],
)
def test_search_rejects_bad_limits(
    small: LineLog, context: int, max_matches: int, words: str
) -> None:
    with pytest.raises(ValueError, match=words):
        search_log(small, Matcher.build("alpha"), context=context, max_matches=max_matches)


def test_empty_log(tmp_path: Path) -> None:
    result = search_log(LineLog(tmp_path / "empty"), Matcher.build("x"), context=3)
    assert (result.groups, result.matches, result.truncated) == ([], 0, False)


@pytest.mark.timeout(30)
def test_catastrophic_regex_times_out(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "log")
    log.append(["short line", "a" * 100_000 + "b", "after"])
    matcher = Matcher.build(r"(a+)+$", "regex")
    with pytest.raises(SearchTimeout, match="deadline"):
        search_log(log, matcher, deadline=time.monotonic() + 2)


@pytest.mark.timeout(30)
def test_catastrophic_regex_on_pending_line_times_out(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "log")
    log.set_pending("a" * 40 + "b")
    with pytest.raises(SearchTimeout):
        search_log(log, Matcher.build(r"(a|aa)+$"), deadline=time.monotonic() + 1)


@pytest.mark.parametrize("query", ["alpha", "^alpha"])
def test_passed_deadline_times_out(small: LineLog, query: str) -> None:
    with pytest.raises(SearchTimeout):
        search_log(small, Matcher.build(query), deadline=time.monotonic() - 1)


@pytest.mark.parametrize(("query", "matches"), [("alpha", 3), ("^alpha", 1), ("(?i)^alpha", 2)])
def test_future_deadline_finds_matches(small: LineLog, query: str, matches: int) -> None:
    result = search_log(small, Matcher.build(query), deadline=time.monotonic() + 60)
    assert result.matches == matches


# (query, mode, ignore_case, context, max_matches, matched 0-based lines, truncated)
BIG_CASES: list[tuple[str, SearchMode, bool, int, int, list[int], bool]] = [
    ("line 0999999", "literal", False, 0, 50, [999_999], False),
    ("LINE 0500000 OF", "literal", True, 0, 50, [500_000], False),
    ("line 014979", "literal", False, 0, 50, list(range(149_790, 149_800)), False),
    (r"^line 07777[0-9]{2} ", "regex", False, 0, 50, list(range(777_700, 777_750)), True),
    ("of the big log", "literal", False, 0, 5, [0, 1, 2, 3, 4], True),
    ("line 0333333", "auto", False, 2, 50, [333_333], False),
    ("no such text", "literal", True, 0, 50, [], False),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("query", "mode", "ignore_case", "context", "max_matches", "matched", "truncated"),
    BIG_CASES,
)
def test_search_big_log(
    big_log: LineLog,
    big_line: Callable[[int], str],
    query: str,
    mode: SearchMode,
    ignore_case: bool,
    context: int,
    max_matches: int,
    matched: list[int],
    truncated: bool,
) -> None:
    matcher = Matcher.build(query, mode, ignore_case)
    result = search_log(big_log, matcher, context=context, max_matches=max_matches)
    hits = [hit for group in result.groups for hit in group]
    shown = sorted({i for m in matched for i in range(m - context, m + context + 1)})
    assert hits == [Hit(i + 1, big_line(i), "M" if i in matched else "C") for i in shown]
    assert (result.matches, result.truncated) == (len(matched), truncated)


def log_of(path: Path, *blocks: list[str], pending: str = "") -> LineLog:
    """Return a log of `blocks` appended one by one, with `pending` as its unfinished line."""
    log = LineLog(path)
    for block in blocks:
        log.append(block)
    if pending:
        log.set_pending(pending)
    return log


def numbers(result: LogMatches) -> list[int]:
    """Return the numbers of the matching lines."""
    return [hit.number for group in result.groups for hit in group if hit.marker == "M"]


# (id, blocks, query, mode, ignore_case, matching line numbers)
MORE_CASES: list[tuple[str, list[list[str]], str, SearchMode, bool, list[int]]] = [
    ("case kept", [SMALL], "Alpha", "literal", False, [4]),
    ("case kept, folded text unmatched", [SMALL], "STRASSE", "literal", False, []),
    ("a match after an empty first line", [["", "alpha"]], "alpha", "literal", False, [2]),
    ("a match after empty lines", [["", "", "x alpha", ""]], "alpha", "literal", False, [3]),
    ("lines are joined by nothing a query can match", [["a", "b"]], "X", "literal", False, []),
    ("the last line of a block", [["a", "b"], ["c", "alpha"]], "alpha", "literal", False, [4]),
    ("auto ignoring case, as text", [SMALL], "ALPHA FOUR", "auto", True, [4]),
    ("auto ignoring case, as a regex", [SMALL], "^ALPHA", "auto", True, [1, 4]),
    ("auto ignoring case, invalid regex", [SMALL], "CALL F(", "auto", True, [11]),
]


@pytest.mark.parametrize(
    ("blocks", "query", "mode", "ignore_case", "expected"),
    [c[1:] for c in MORE_CASES],
    ids=[c[0] for c in MORE_CASES],
)
def test_search_finds_exactly_these_lines(
    tmp_path: Path,
    blocks: list[list[str]],
    query: str,
    mode: SearchMode,
    ignore_case: bool,
    expected: list[int],
) -> None:
    log = log_of(tmp_path / "log", *blocks)
    assert numbers(search_log(log, Matcher.build(query, mode, ignore_case))) == expected


def test_auto_is_the_default_mode_and_case_counts() -> None:
    assert (Matcher.build("f(0)").mode, Matcher.build("f(0)").ignore_case) == (
        "literal or regex",
        False,
    )
    assert Matcher.build("plain").mode == "literal"


@pytest.mark.parametrize(
    ("query", "mode", "resolved"),
    [("plain", "auto", "literal"), ("f(0)", "auto", "literal or regex"), ("f(", "auto", "literal")],
)
def test_ignoring_case_is_kept_whatever_the_mode_resolves_to(
    query: str, mode: SearchMode, resolved: str
) -> None:
    matcher = Matcher.build(query, mode, ignore_case=True)
    assert (matcher.mode, matcher.ignore_case) == (resolved, True)


def test_a_search_by_default_shows_no_context_and_fifty_matches(tmp_path: Path) -> None:
    log = log_of(tmp_path / "log", [f"hit {i}" if i % 2 else "miss" for i in range(1, 120)])
    result = search_log(log, Matcher.build("hit"))
    assert all(hit.marker == "M" for group in result.groups for hit in group)
    assert (result.matches, result.truncated) == (50, True)
    assert numbers(result)[-1] == 99


@pytest.mark.parametrize(("count", "truncated"), [(50, False), (51, True)])
def test_fifty_matches_are_all_the_default_shows(
    tmp_path: Path, count: int, truncated: bool
) -> None:
    log = log_of(tmp_path / "log", ["hit"] * count)
    result = search_log(log, Matcher.build("hit"))
    assert (result.matches, result.truncated) == (50, truncated)


def test_one_match_may_be_asked_for(small: LineLog) -> None:
    result = search_log(small, Matcher.build("alpha"), max_matches=1)
    assert (numbers(result), result.truncated) == ([1], True)


def test_an_empty_query_says_what_to_give() -> None:
    with pytest.raises(SearchError) as raised:
        Matcher.build("")
    assert str(raised.value) == "The search query is empty; give the text or pattern to look for."


def test_a_passed_deadline_says_to_simplify(small: LineLog) -> None:
    with pytest.raises(SearchTimeout) as raised:
        search_log(small, Matcher.build("^alpha"), deadline=time.monotonic() - 1)
    assert str(raised.value) == (
        "The search did not finish before its deadline; try a simpler query."
    )


def test_a_passed_deadline_times_out_even_when_the_text_matches_every_line(tmp_path: Path) -> None:
    log = log_of(tmp_path / "log", ["f(0)"])
    with pytest.raises(SearchTimeout):
        search_log(log, Matcher.build("f(0)"), deadline=time.monotonic() - 1)


@pytest.mark.parametrize(
    ("query", "mode"), [("^alpha", "regex"), ("f(0)", "auto"), ("a.p", "auto")]
)
def test_a_deadline_in_under_a_second_finds_what_no_deadline_finds(
    small: LineLog, query: str, mode: SearchMode
) -> None:
    matcher = Matcher.build(query, mode)
    expected = numbers(search_log(small, matcher))
    assert expected
    assert numbers(search_log(small, matcher, deadline=time.monotonic() + 0.5)) == expected


def test_with_a_deadline_text_and_regex_matches_both_count(tmp_path: Path) -> None:
    log = log_of(tmp_path / "log", ["zero", "one"], ["f(0) as typed", "f0 as a regex", "f0 again"])
    matcher = Matcher.build("f(0)")
    expected = [3, 4, 5]
    assert numbers(search_log(log, matcher)) == expected
    assert numbers(search_log(log, matcher, deadline=time.monotonic() + 30)) == expected


def records(tmp_path: Path, *logs: list[str]) -> list[tuple[int, LineLog]]:
    """Return (execution number, log) pairs numbered from 3, one log of each of `logs`."""
    return [
        (number, log_of(tmp_path / str(number), lines))
        for number, lines in enumerate(logs, start=3)
    ]


def found(reply: RecordMatches) -> list[tuple[int, list[tuple[int, str, str]]]]:
    """Return each group of a reply as (execution, [(n, marker, text)])."""
    return [
        (group["execution"], [(line["n"], line["marker"], line["text"]) for line in group["lines"]])
        for group in reply["groups"]
    ]


def test_records_are_searched_in_order_with_context(tmp_path: Path) -> None:
    logs = records(tmp_path, ["a", "hit 1", "b"], ["none"], ["hit 2", "c"])
    reply = search_records(logs, Matcher.build("hit"), context=1, max_matches=10, timeout=30)
    assert found(reply) == [
        (3, [(1, "C", "a"), (2, "M", "hit 1"), (3, "C", "b")]),
        (5, [(1, "M", "hit 2"), (2, "C", "c")]),
    ]
    assert (reply["matches"], reply["truncated"], reply["searched"]) == (2, False, 3)


@pytest.mark.parametrize(
    ("max_matches", "shown", "truncated", "searched"),
    [
        (1, [(3, [(1, "M", "hit")])], True, 1),
        (2, [(3, [(1, "M", "hit")]), (4, [(1, "M", "hit")])], True, 2),
        (3, [(3, [(1, "M", "hit")]), (4, [(1, "M", "hit")]), (5, [(1, "M", "hit")])], True, 3),
        (
            4,
            [
                (3, [(1, "M", "hit")]),
                (4, [(1, "M", "hit")]),
                (5, [(1, "M", "hit"), (2, "M", "hit")]),
            ],
            False,
            3,
        ),
    ],
)
def test_records_stop_at_the_most_matches(
    tmp_path: Path,
    max_matches: int,
    shown: list[tuple[int, list[tuple[int, str, str]]]],
    truncated: bool,
    searched: int,
) -> None:
    logs = records(tmp_path, ["hit"], ["hit"], ["hit", "hit"])
    reply = search_records(
        logs, Matcher.build("hit"), context=0, max_matches=max_matches, timeout=30
    )
    assert found(reply) == shown
    assert reply["matches"] == sum(len(lines) for _, lines in shown)
    assert (reply["truncated"], reply["searched"]) == (truncated, searched)


def test_records_with_nothing_to_search(tmp_path: Path) -> None:
    reply = search_records([], Matcher.build("hit"), context=0, max_matches=5, timeout=30)
    assert reply == {"matches": 0, "truncated": False, "groups": [], "searched": 0}


def test_records_past_their_timeout_time_out(tmp_path: Path) -> None:
    logs = records(tmp_path, ["hit"])
    with pytest.raises(SearchTimeout):
        search_records(logs, Matcher.build("^hit"), context=0, max_matches=5, timeout=-1)


def test_records_within_their_timeout_are_found(tmp_path: Path) -> None:
    logs = records(tmp_path, ["hit"], ["x", "hit"])
    reply = search_records(logs, Matcher.build("^hit"), context=0, max_matches=5, timeout=0.5)
    assert found(reply) == [(3, [(1, "M", "hit")]), (4, [(2, "M", "hit")])]
