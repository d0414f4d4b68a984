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
    ],
)
def test_parse_size(value: str | int, expected: int) -> None:
    assert parse_size(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("4 gigs", "unknown unit 'gigs'"),
        ("4PiB", "unknown unit 'PiB'"),
        ("", "is not a size"),
        ("GiB", "is not a size"),
        ("-4GiB", "is not a size"),
        ("4,5GiB", "is not a size"),
        ("0", "is not positive"),
        ("0.0001B", "is not positive"),
        (0, "is not positive"),
        (-1, "is not positive"),
        (True, "is not a size"),
        (4.5, "is not a size"),
        (None, "is not a size"),
    ],
)
def test_parse_size_refuses(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message) as refused:
        parse_size(value)  # type: ignore[arg-type]
    assert "e.g. '4GiB'" in str(refused.value) or "use B, KiB" in str(refused.value)


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
