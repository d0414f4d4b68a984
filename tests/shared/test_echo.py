"""echo(): a caller's value in an error message, cut when it is long."""

from __future__ import annotations

import pytest

from loomgate.shared.echo import echo


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("abc", "'abc'"),
        ("", "''"),
        (42, "42"),
        (None, "None"),
        ("\x00", "'\\x00'"),
        ("a\nb\tc", "'a\\nb\\tc'"),
        ("LINE 1\\d\\d$", "'LINE 1\\d\\d$'"),  # backslashes as typed, never doubled
        ("it's", "'it's'"),
        ("x" * 78, "'" + "x" * 78 + "'"),
        ("x" * 79, "'" + "x" * 78 + "… (79 characters)"),
        ("é" * 5000, "'" + "é" * 78 + "… (5,000 characters)"),
        (b"b" * 100, "b'" + "b" * 77 + "… (100 characters)"),
        (list(range(40)), repr(list(range(40)))[:79] + "… (150 characters)"),
    ],
)
def test_echo(value: object, expected: str) -> None:
    assert echo(value) == expected
