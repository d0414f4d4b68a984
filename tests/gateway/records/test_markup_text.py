"""The text stored for a rich output with none worth reading: HTML's words, SVG's words, and what
was left out."""

from __future__ import annotations

import pytest

from loomgate.gateway.records.markup_text import html_text, readable_text, svg_text


@pytest.mark.parametrize(
    ("html", "words"),
    [
        ("<b>Dog</b>, not a cat.", "Dog, not a cat."),
        ("<p>one</p><p>two &amp; three</p>", "one\ntwo & three"),
        ("line<br>next", "line\nnext"),
        ("<script>alert(1)</script><style>p {}</style><div>shown</div>", "shown"),
        (
            "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>",
            "a b\n1 2",
        ),
        ("<ul><li>x</li><li>y</li></ul>", "x\ny"),
        ("  lots   of\n\n space  ", "lots of space"),
        ("<div><p>unclosed", "unclosed"),
        ("<b>Dog</b><i>cat</i>", "Dogcat"),  # inline elements run on
        ("<head><style>s</style><title>t</title></head><p>shown</p>", "shown"),
        ("<head><script>x</script>words</head><p>shown</p>", "shown"),
        ("", ""),
    ],
)
def test_html_reads_as_the_words_a_browser_shows(html: str, words: str) -> None:
    assert html_text(html) == words


@pytest.mark.parametrize(
    ("svg", "words"),
    [
        ("<svg>stray<text>hi</text></svg>", "hi"),
        ("<svg><text>a</text>stray<text>b</text></svg>", "a\nb"),
        ("<svg><text>x<tspan>y</tspan>z</text>after</svg>", "xyz"),
        ("<svg><g><rect/></g>nothing drawn in words</svg>", ""),
    ],
)
def test_only_the_words_an_svg_draws_are_read(svg: str, words: str) -> None:
    assert svg_text(svg) == words


def test_svg_reads_as_the_words_it_draws() -> None:
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg"><title>Sales</title><rect width="4"/>'
        "<text x='1'>2026: <tspan>up</tspan></text><g><desc>a bar chart</desc></g></svg>"
    )
    assert svg_text(svg) == "Sales\n2026: up\na bar chart"


@pytest.mark.parametrize(
    ("data", "stored"),
    [
        ({"text/plain": "a table"}, None),  # worth reading: kept as it is
        ({"text/plain": "a table", "text/html": "<table/>"}, None),
        (
            {"text/plain": "<IPython.core.display.HTML object>", "text/html": "<b>Dog</b>"},
            "Dog\n[text/html shown as its words: its markup left out]",
        ),
        (
            {"text/plain": "<Foo object at 0x7f00AB>", "text/html": "<i>x</i>"},
            "x\n[text/html shown as its words: its markup left out]",
        ),
        (
            {"text/html": "<script>x()</script>"},
            "[text/html shown as its words: its markup left out]",
        ),
        (
            {"image/svg+xml": "<svg><text>hi</text></svg>"},
            "hi\n[image/svg+xml: its drawing left out]",
        ),
        ({"application/json": {"a": 1}}, None),
    ],
)
def test_a_bundle_without_readable_text_gets_its_markups_words(
    data: dict[str, object], stored: str | None
) -> None:
    assert readable_text(data) == stored
