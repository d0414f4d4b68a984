"""Tests for `start:stop` line range parsing and resolution."""

from __future__ import annotations

import pytest

from loomgate.gateway.records.line_range import LineRange, LineRangeError

# (text, start, stop, canonical spelling)
PARSED: list[tuple[str | None, int | None, int | None, str]] = [
    (None, None, None, ":"),
    ("", None, None, ":"),
    ("   ", None, None, ":"),
    (":", None, None, ":"),
    (":10", None, 10, ":10"),
    ("-20:", -20, None, "-20:"),
    ("3:", 3, None, "3:"),
    ("7:7", 7, 7, "7:7"),
    ("7", 7, 7, "7:7"),
    ("-5", -5, -5, "-5:-5"),
    ("-1", -1, -1, "-1:-1"),
    (" 2 : 4 ", 2, 4, "2:4"),
    ("+3:4", 3, 4, "3:4"),
    ("-3:5", -3, 5, "-3:5"),
    ("5:-3", 5, -3, "5:-3"),
    ("-5:-3", -5, -3, "-5:-3"),
    ("100:120", 100, 120, "100:120"),
]


@pytest.mark.parametrize(("text", "start", "stop", "canonical"), PARSED)
def test_parse(text: str | None, start: int | None, stop: int | None, canonical: str) -> None:
    parsed = LineRange.parse(text)
    assert (parsed.start, parsed.stop) == (start, stop)
    assert str(parsed) == canonical
    assert LineRange.parse(str(parsed)) == parsed


# (text, words the message must contain)
INVALID: list[tuple[str, str]] = [
    ("0", "start at 1"),
    ("0:5", "start at 1"),
    (":0", "start at 1"),
    ("-0:", "start at 1"),
    ("abc", "START:STOP"),
    ("1:2:3", "START:STOP"),
    ("1.5:", "START:STOP"),
    ("1:x", "START:STOP"),
    ("--1:", "START:STOP"),
    ("1 2", "START:STOP"),
    ("5:3", "start 5 comes after stop 3"),
    (" 5 : 3", "start 5 comes after stop 3"),  # named as typed
    ("-3:-5", "start -3 comes after stop -5"),
]


@pytest.mark.parametrize(("text", "words"), INVALID)
def test_parse_rejects(text: str, words: str) -> None:
    with pytest.raises(LineRangeError) as raised:
        LineRange.parse(text)
    message = str(raised.value)
    assert repr(text) in message
    assert words in message
    assert message.endswith(".")
    assert "\n" not in message


def test_the_whole_message() -> None:
    with pytest.raises(LineRangeError) as raised:
        LineRange.parse("0")
    assert str(raised.value) == (
        "Invalid line range '0': line numbers start at 1; expected START:STOP, 1-based, either "
        "end optional, negative counting from the end."
    )


@pytest.mark.parametrize(("start", "stop"), [(0, 3), (3, 0), (5, 3), (-1, -2)])
def test_constructor_rejects(start: int, stop: int) -> None:
    with pytest.raises(LineRangeError) as raised:
        LineRange(start, stop)
    assert str(raised.value).startswith(f"Invalid line range '{start}:{stop}': ")


# (text, total lines, 0-based half-open span)
RESOLVED: list[tuple[str | None, int, tuple[int, int]]] = [
    (None, 100, (0, 100)),
    (":", 0, (0, 0)),
    (":10", 100, (0, 10)),
    (":10", 5, (0, 5)),
    ("-20:", 100, (80, 100)),
    ("-20:", 5, (0, 5)),
    ("3:", 10, (2, 10)),
    ("7:7", 100, (6, 7)),
    ("1", 10, (0, 1)),
    ("1:3", 10, (0, 3)),
    ("7", 100, (6, 7)),
    ("-1", 10, (9, 10)),
    ("-1", 0, (0, 0)),
    ("2:1000", 10, (1, 10)),
    ("100:120", 50, (50, 50)),
    ("11:", 10, (10, 10)),
    ("3:5", 0, (0, 0)),
    ("-200:-100", 50, (0, 0)),
    ("5:-10", 10, (4, 4)),
    ("-3:2", 10, (7, 7)),
    ("-3:9", 10, (7, 9)),
    ("2:-2", 10, (1, 9)),
]


@pytest.mark.parametrize(("text", "total", "span"), RESOLVED)
def test_resolve(text: str | None, total: int, span: tuple[int, int]) -> None:
    lo, hi = LineRange.parse(text).resolve(total)
    assert (lo, hi) == span
    assert 0 <= lo <= hi <= total
