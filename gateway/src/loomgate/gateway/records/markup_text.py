"""The text stored for a rich output that brings none worth reading: HTML as the words a browser
shows (scripts, styles and tags left out, each block on a line of its own), SVG as the words it
draws, and a last line saying what was left out. A text/plain that only names the object
(`<IPython.core.display.HTML object>`) counts as none."""

from __future__ import annotations

import re
from collections.abc import Mapping
from html.parser import HTMLParser

HTML = "text/html"
SVG = "image/svg+xml"
# The repr Python gives an object without one of its own: it says nothing of the output.
BARE_REPR = re.compile(r"<[\w.]+ object(?: at 0x[0-9a-fA-F]+)?>")
# Elements that begin a line of their own in what a browser shows.
BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "tr",
        "ul",
    }
)
CELLS = frozenset({"td", "th"})  # a table's cells: on one line, apart
UNSEEN = frozenset({"script", "style", "head", "template", "noscript"})
SVG_WORDS = frozenset({"text", "tspan", "title", "desc", "textpath"})


class Words(HTMLParser):
    """The words of a page (or, with `only`, of those elements only), in lines."""

    def __init__(self, only: frozenset[str] | None = None) -> None:
        super().__init__(convert_charrefs=True)
        self.only = only
        self.lines: list[list[str]] = [[]]
        self.hidden = 0  # how deep inside an element whose words are not shown
        self.shown = 0  # with `only`: how deep inside an element whose words are

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        tag = tag.lower()
        if tag in UNSEEN:
            self.hidden += 1
        elif tag in BLOCKS:
            self.lines.append([])
        elif tag in CELLS and self.lines[-1]:
            self.lines[-1].append("  ")
        if self.only is not None and tag in self.only:
            self.shown += 1

    def handle_endtag(self, tag: str) -> None:
        tag = tag.lower()
        if tag in UNSEEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in BLOCKS:
            self.lines.append([])
        if self.only is not None and tag in self.only:
            self.shown = max(0, self.shown - 1)
            if not self.shown:  # the outermost one ends its line (a tspan runs on)
                self.lines.append([])

    def handle_data(self, data: str) -> None:
        if self.hidden or (self.only is not None and not self.shown):
            return
        self.lines[-1].append(data)

    def text(self) -> str:
        """Return the words read, a line per block, spaces as a browser collapses them."""
        lines = (" ".join("".join(parts).split()) for parts in self.lines)
        return "\n".join(line for line in lines if line)


def html_text(html: str) -> str:
    """Return the words `html` shows."""
    words = Words()
    words.feed(html)
    words.close()
    return words.text()


def svg_text(svg: str) -> str:
    """Return the words an SVG drawing shows or names (its text, title and description)."""
    words = Words(SVG_WORDS)
    words.feed(svg)
    words.close()
    return words.text()


def readable_text(data: Mapping[str, object]) -> str | None:
    """Return the text to store for a bundle whose text/plain is missing or a bare repr: its
    HTML's words, else its SVG's, each with what was left out; None when it has neither (or
    its text/plain is worth reading)."""
    plain = data.get("text/plain")
    if isinstance(plain, str) and not BARE_REPR.fullmatch(plain.strip()):
        return None
    html = data.get(HTML)
    if isinstance(html, str):
        shown = html_text(html)
        return "\n".join(
            filter(None, [shown, "[text/html shown as its words: its markup left out]"])
        )
    svg = data.get(SVG)
    if isinstance(svg, str):
        shown = svg_text(svg)
        return "\n".join(filter(None, [shown, "[image/svg+xml: its drawing left out]"]))
    return None
