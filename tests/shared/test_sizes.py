"""Sizes as people write them in sandbox.toml and read them in sentences."""

from __future__ import annotations

import pytest

from loomgate.shared.sizes import GiB, MiB, format_size, parse_size


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (4294967296, 4 * GiB),
        (1, 1),
        ("4GiB", 4 * GiB),
        ("4 GiB", 4 * GiB),
        ("512MiB", 512 * MiB),
        ("512mib", 512 * MiB),
        ("2G", 2 * GiB),
        ("2g", 2 * GiB),
        ("100K", 100 * 1024),
        ("1TiB", 1024 * GiB),
        ("4GB", 4 * 10**9),
        ("500MB", 500 * 10**6),
        ("1.5GiB", 3 * GiB // 2),
        ("1024", 1024),
        ("1024B", 1024),
        (" 8 GiB ", 8 * GiB),
        ("1", 1),
        ("1B", 1),
        ("9007199254740993", 9007199254740993),  # a whole number is not read through a float
    ],
)
def test_parse_size(value: str | int, expected: int) -> None:
    assert parse_size(value) == expected


EXAMPLES = "write e.g. '4GiB', '512MiB', '2G' or a number of bytes"
UNITS = "use B, KiB, MiB, GiB, TiB (or K, M, G, T), or KB, MB, GB, TB for powers of 1000"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("4 gigs", f"'4 gigs' has an unknown unit 'gigs': {UNITS}"),
        ("4PiB", f"'4PiB' has an unknown unit 'PiB': {UNITS}"),
        ("", f"'' is not a size: {EXAMPLES}"),
        ("GiB", f"'GiB' is not a size: {EXAMPLES}"),
        ("-4GiB", f"'-4GiB' is not a size: {EXAMPLES}"),
        ("4,5GiB", f"'4,5GiB' is not a size: {EXAMPLES}"),
        ("0", f"size '0' is not positive: {EXAMPLES}"),
        ("0.0001B", f"size '0.0001B' is not positive: {EXAMPLES}"),
        (0, f"size 0 is not positive: {EXAMPLES}"),
        (-1, f"size -1 is not positive: {EXAMPLES}"),
        (True, f"True is not a size: {EXAMPLES}"),
        (4.5, f"4.5 is not a size: {EXAMPLES}"),
        (None, f"None is not a size: {EXAMPLES}"),
    ],
)
def test_parse_size_refuses(value: object, message: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_size(value)  # type: ignore[arg-type]
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        (4 * GiB, "4 GiB"),
        (3 * GiB // 2, "1.5 GiB"),
        (512 * MiB, "512 MiB"),
        (12052 * MiB, "11.77 GiB"),
        (1024 * GiB, "1 TiB"),
        (1536, "1.5 KiB"),
        (1023, "1023 bytes"),
        (1, "1 byte"),
        (4 * 10**9, "3.73 GiB"),
    ],
)
def test_format_size(size: int, expected: str) -> None:
    assert format_size(size) == expected
