"""Sizes of memory as people write and read them: "4GiB" in a config, "4 GiB" in a sentence."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

KiB = 1024
MiB = KiB * 1024
GiB = MiB * 1024
TiB = GiB * 1024

# Binary units (K, KiB: 1024) and the SI ones spelled with a B (KB: 1000), any case.
SIZE_UNITS: Mapping[str, int] = MappingProxyType(
    {
        "": 1,
        "b": 1,
        **{f"{p}": 1024**n for n, p in enumerate("kmgt", 1)},
        **{f"{p}ib": 1024**n for n, p in enumerate("kmgt", 1)},
        **{f"{p}b": 1000**n for n, p in enumerate("kmgt", 1)},
    }
)
SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")
SIZE_EXAMPLES = "e.g. '4GiB', '512MiB', '2G' or a number of bytes"


def parse_size(value: str | int) -> int:
    """Return the bytes a size stands for: `4294967296`, `"4GiB"`, `"512MiB"`, `"2G"` (binary),
    `"4GB"` (SI, 4×10⁹), `"1.5GiB"`; ValueError with a sentence if it is not a positive size."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{value!r} is not a size: write {SIZE_EXAMPLES}")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"size {value} is not positive: write {SIZE_EXAMPLES}")
        return value
    match = SIZE.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not a size: write {SIZE_EXAMPLES}")
    number, unit = match.groups()
    factor = SIZE_UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(
            f"{value!r} has an unknown unit {unit!r}: use B, KiB, MiB, GiB, TiB (or K, M, G, T), "
            "or KB, MB, GB, TB for powers of 1000"
        )
    size = int(float(number) * factor) if "." in number else int(number) * factor
    if size <= 0:
        raise ValueError(f"size {value!r} is not positive: write {SIZE_EXAMPLES}")
    return size


def format_size(size: int) -> str:
    """Return `size` bytes for people: "4 GiB", "1.5 GiB", "512 MiB", "100 bytes"."""
    for unit, factor in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size >= factor:
            text = f"{size / factor:.2f}".rstrip("0").rstrip(".")
            return f"{text} {unit}"
    return f"{size} byte" if size == 1 else f"{size} bytes"
