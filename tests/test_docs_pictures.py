"""The pictures docs/ shows (made by the browser tests with LOOMGATE_WRITE_PICTURES=1): each is
there, a PNG of a screen's size, and not blank."""

from __future__ import annotations

import pytest

from tests.support.pictures import DOCS, blank
from tests.support.png import Picture, decode

PICTURES = ["apps.png", "monitor.png"]  # the execution view, the monitor page
WHITE, DARK, GREY = b"\xff\xff\xff", b"\x0d\x11\x17", b"\xf6\xf8\xfa"


def picture(rows: list[bytes]) -> Picture:
    """Return an RGB picture of `rows` (each a row of 3-byte pixels)."""
    return Picture(len(rows[0]) // 3, len(rows), 3, rows)


def shades(n: int) -> bytes:
    """Return a row of `n` pixels, each a colour of its own."""
    return b"".join(bytes((i % 256, i // 256, 128)) for i in range(n))


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        ([WHITE * 100] * 100, "1 colours"),
        ([DARK * 100] + [WHITE * 100] * 99, "2 colours"),  # a line on a white page
        ([GREY * 50 + WHITE * 50] * 100, "2 colours"),  # two panes, nothing in them
        ([shades(100)] + [WHITE * 100] * 199, "0.50% of its pixels"),  # a speck of detail
        ([shades(100)] + [WHITE * 100] * 99, None),
        ([shades(200)] * 10, None),
        ([b""], "no pixels"),
    ],
)
def test_a_blank_picture_is_told_from_one_that_shows_something(
    rows: list[bytes], why: str | None
) -> None:
    found = blank(picture(rows))
    assert found == why if why is None else found is not None and found.startswith(why)


@pytest.mark.parametrize("name", PICTURES)
def test_the_picture_in_docs_shows_something(name: str) -> None:
    path = DOCS / name
    assert path.is_file(), f"{path} is missing: run its browser test with LOOMGATE_WRITE_PICTURES=1"
    data = path.read_bytes()
    assert 10_000 <= len(data) <= 1_000_000, len(data)
    shown = decode(data)  # a PNG, or ValueError
    assert 800 <= shown.width <= 2000 and 300 <= shown.height <= 1600, (shown.width, shown.height)
    assert blank(shown) is None, f"{name}: {blank(shown)}"
