"""Tests for the incremental terminal-text normalizer."""

from __future__ import annotations

import tracemalloc

import pytest

from loomgate.gateway.records.terminal_text import TerminalText, normalize, normalized_text

# (id, stream text, lines a terminal would show)
CASES: list[tuple[str, str, list[str]]] = [
    ("empty", "", []),
    ("one newline", "\n", [""]),
    ("plain lines", "alpha\nbeta\n", ["alpha", "beta"]),
    ("unterminated last line", "alpha\nbeta", ["alpha", "beta"]),
    ("blank lines kept", "a\n\n\nb\n", ["a", "", "", "b"]),
    ("non-ascii", "héllo wörld ✓ 日本\n", ["héllo wörld ✓ 日本"]),
    ("crlf", "a\r\nb\r\n", ["a", "b"]),
    ("cr then lf keeps the line", "abc\r\n", ["abc"]),
    ("cr overwrites", "abcdef\rXY\n", ["XYcdef"]),
    ("cr overwrite past end", "ab\rwxyz\n", ["wxyz"]),
    ("tqdm bar", "  0%|\r 50%|\r100%|\n", ["100%|"]),
    ("tab kept", "a\tb\n", ["a\tb"]),
    ("backspace overwrites", "abc\bX\n", ["abX"]),
    ("backspace stops at column 0", "a\b\b\bX\n", ["X"]),
    ("backspace alone erases nothing", "ab\b\n", ["ab"]),
    ("spinner", "work |\b/\b-\b\\\n", ["work \\"]),
    ("sgr removed", "\x1b[1;31mred\x1b[0m plain\n", ["red plain"]),
    ("cursor move removed", "a\x1b[2Cb\x1b[3;4Hc\n", ["abc"]),
    ("private csi removed", "\x1b[?25lx\x1b[?25h\n", ["x"]),
    ("8-bit csi removed", "a\x9b31mb\n", ["ab"]),
    ("csi K erases to end", "abcdef\r\x1b[Kxy\n", ["xy"]),
    ("csi 0K erases to end", "abcdef\rab\x1b[0K\n", ["ab"]),
    ("csi 0K at end is a no-op", "abc\x1b[0Kd\n", ["abcd"]),
    ("csi 2K erases the line", "abcdef\x1b[2K\rxy\n", ["xy"]),
    ("csi 2K keeps the cursor", "abc\x1b[2Kd\n", ["   d"]),
    ("csi 1K blanks through cursor", "abcdef\rab\x1b[1K\n", ["   def"]),
    ("csi 1K then write", "abcdef\rab\x1b[1Kx\n", ["  xdef"]),
    ("csi 1K past the end", "ab\x1b[1K\n", ["  "]),
    ("8-bit csi K", "abcdef\r\x9bKz\n", ["z"]),
    ("osc ended by bel", "a\x1b]0;title\x07b\n", ["ab"]),
    ("osc ended by esc backslash", "a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b\n", ["alinkb"]),
    ("osc ended by 8-bit st", "a\x1b]0;t\x9cb\n", ["ab"]),
    ("osc swallows controls", "a\x1b]0;x\ny\rz\x07b\n", ["ab"]),
    ("esc inside osc starts a sequence", "a\x1b]0;t\x1b[31mb\n", ["ab"]),
    ("dcs", "a\x1bPq#0;1\x1b\\b\n", ["ab"]),
    ("dcs not ended by bel", "a\x1bPx\x07y\x1b\\b\n", ["ab"]),
    ("sos", "a\x1bXstuff\x1b\\b\n", ["ab"]),
    ("pm", "a\x1b^stuff\x1b\\b\n", ["ab"]),
    ("apc", "a\x1b_stuff\x9cb\n", ["ab"]),
    ("two-char escapes", "a\x1b=b\x1b>c\x1b7d\x1bMe\n", ["abcde"]),
    ("charset designators", "\x1b(Ba\x1b)0b\x1b#8c\n", ["abc"]),
    ("esc esc", "a\x1b\x1b[31mb\n", ["ab"]),
    ("esc then newline", "a\x1b\nb\n", ["a", "b"]),
    ("csi aborted by newline", "a\x1b[12\nb\n", ["a", "b"]),
    ("c0 controls dropped", "a\x07b\x00c\x7fd\x0ee\x0bf\x0cg\n", ["abcdefg"]),
    ("c1 controls dropped", "a\x85b\x9dc\x90d\n", ["abcd"]),
    ("incomplete csi at end", "abc\x1b[1;3", ["abc"]),
    ("lone esc at end", "abc\x1b", ["abc"]),
    ("unterminated osc at end", "abc\x1b]0;never ends", ["abc"]),
    ("erased line is empty", "abc\x1b[2K\n", [""]),
    ("erased last line is dropped", "x\nabc\x1b[2K", ["x"]),
]


def feeds_at_every_split(chunk: str | bytes) -> list[tuple[str | bytes, str | bytes]]:
    """Return every way of cutting `chunk` into two consecutive feeds."""
    return [(chunk[:i], chunk[i:]) for i in range(len(chunk) + 1)]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_normalize(text: str, expected: list[str]) -> None:
    assert normalize(text) == expected
    assert normalize(text.encode()) == expected


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_split_anywhere(text: str, expected: list[str], as_bytes: bool) -> None:
    stream = text.encode() if as_bytes else text
    for first, second in feeds_at_every_split(stream):
        terminal = TerminalText()
        lines = terminal.feed(first) + terminal.feed(second) + terminal.finish()
        assert lines == expected, (first, second)


@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_one_char_at_a_time(as_bytes: bool) -> None:
    stream = "".join(text for _, text, _ in CASES)
    expected = normalize(stream)
    terminal = TerminalText()
    data = stream.encode() if as_bytes else stream
    lines = [line for i in range(len(data)) for line in terminal.feed(data[i : i + 1])]
    assert lines + terminal.finish() == expected


# (id, bytes, lines)
INVALID_UTF8: list[tuple[str, bytes, list[str]]] = [
    ("invalid byte", b"ab\xffcd\n", ["ab\ufffdcd"]),
    ("two invalid bytes", b"\xfe\xff\n", ["\ufffd\ufffd"]),
    ("truncated sequence before newline", b"x\xe2\x82\ny\n", ["x\ufffd", "y"]),
    ("truncated sequence at end", b"abc\xe2\x82", ["abc\ufffd"]),
    ("lone continuation byte", b"a\x80b\n", ["a\ufffdb"]),
    ("overlong encoding", b"a\xc0\xafb\n", ["a\ufffd\ufffdb"]),
    ("valid multibyte", "€ 𝄞\n".encode(), ["€ 𝄞"]),
]


@pytest.mark.parametrize(
    ("data", "expected"), [c[1:] for c in INVALID_UTF8], ids=[c[0] for c in INVALID_UTF8]
)
def test_utf8_decoding_split_anywhere(data: bytes, expected: list[str]) -> None:
    for first, second in feeds_at_every_split(data):
        terminal = TerminalText()
        assert terminal.feed(first) + terminal.feed(second) + terminal.finish() == expected


def test_text_after_unfinished_bytes_flushes_them() -> None:
    terminal = TerminalText()
    assert terminal.feed(b"a\xe2\x82") == []
    assert terminal.feed("b\n") == ["a\ufffdb"]


# (id, feeds, (lines returned by each feed), pending after each feed)
INCREMENTAL: list[tuple[str, list[str], list[list[str]], list[str]]] = [
    (
        "lines complete as newlines arrive",
        ["abc", "def\ngh", "\r", "X", "\n"],
        [[], ["abcdef"], [], [], ["Xh"]],
        ["abc", "gh", "gh", "Xh", ""],
    ),
    (
        "escape split across feeds is invisible",
        ["a\x1b", "[3", "1m", "b"],
        [[], [], [], []],
        ["a", "a", "a", "ab"],
    ),
    (
        "several lines in one feed",
        ["1\n2\n3\n4"],
        [["1", "2", "3"]],
        ["4"],
    ),
]


@pytest.mark.parametrize(
    ("feeds", "returned", "pending"), [c[1:] for c in INCREMENTAL], ids=[c[0] for c in INCREMENTAL]
)
def test_feed_returns_completed_lines(
    feeds: list[str], returned: list[list[str]], pending: list[str]
) -> None:
    terminal = TerminalText()
    for chunk, lines, rest in zip(feeds, returned, pending, strict=True):
        assert terminal.feed(chunk) == lines
        assert terminal.pending == rest


def test_finish_resets_state() -> None:
    terminal = TerminalText()
    terminal.feed("abc\x1b]0;unterminated")
    assert terminal.finish() == ["abc"]
    assert terminal.pending == ""
    assert terminal.feed("next\n") == ["next"]
    assert terminal.finish() == []


@pytest.mark.parametrize(
    ("prefix", "rewrite", "expected"),
    [
        ("x" * 5000, "y" * 3000, "y" * 3000 + "x" * 2000),
        ("x" * 3000, "y" * 5000, "y" * 5000),
        ("0123456789" * 500, "\b\b\bAB", "0123456789" * 499 + "0123456AB9"),
    ],
    ids=["shorter rewrite", "longer rewrite", "backspaces at the end"],
)
@pytest.mark.parametrize("chunk", [1, 7, 1024])
def test_long_line_overwrites_in_chunks(
    prefix: str, rewrite: str, expected: str, chunk: int
) -> None:
    stream = prefix + ("" if rewrite.startswith("\b") else "\r") + rewrite
    terminal = TerminalText()
    for i in range(0, len(stream), chunk):
        assert terminal.feed(stream[i : i + chunk]) == []
    assert terminal.pending == expected
    assert terminal.finish() == [expected]


@pytest.mark.timeout(60)
def test_ten_megabyte_line_in_small_chunks() -> None:
    terminal = TerminalText()
    chunk = b"0123456789abcdef" * 64
    for _ in range(10 * 1024):
        assert terminal.feed(chunk) == []
    assert terminal.pending == "0123456789abcdef" * 64 * 10 * 1024
    terminal.feed("tail\n")
    assert terminal.pending == ""


def test_unterminated_string_memory_is_bounded() -> None:
    terminal = TerminalText()
    chunk = "payload " * 1280
    terminal.feed("before\x1b]1337;File=")
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            terminal.feed(chunk)
        grown = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024
    assert terminal.feed("\x07after\n") == ["beforeafter"]


# Escape sequences at the edges of their byte ranges: each is dropped whole, however it is split.
EDGES = [
    ("escape with a space intermediate", "a\x1b Fb", ["ab"]),
    ("escape with a slash intermediate", "a\x1b/Fb", ["ab"]),
    ("escape ending in a tilde", "a\x1b~b", ["ab"]),
    ("escape ending in a zero", "a\x1b0b", ["ab"]),
    ("csi ending in an at sign", "a\x1b[2@b", ["ab"]),
    ("csi ending in a tilde", "a\x1b[2~b", ["ab"]),
    ("an escape inside an intermediate starts anew", "x\x1b \x1b[31mred", ["xred"]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in EDGES], ids=[c[0] for c in EDGES])
def test_sequences_at_the_edges_of_their_ranges(text: str, expected: list[str]) -> None:
    assert normalize(text) == expected
    for first, second in feeds_at_every_split(text):
        terminal = TerminalText()
        assert terminal.feed(first) + terminal.feed(second) + terminal.finish() == expected


@pytest.mark.parametrize(
    ("prompt", "shown"),
    [
        ("Name? ", "Name? "),
        ("\x1b]52;c;aGk=\x07\x1b]0;owned\x07\x1b[2JName? ", "Name? "),  # clipboard, title
        ("\x1b]52;c;aGk=\x1b\\Secret: ", "Secret: "),  # an OSC ended by ST
        ("\x1bPq#0;2;0;0;0\x1b\\x", "x"),  # a DCS (sixel)
        ("\x1b[31mred\x1b[0m? ", "red? "),
        ("two\nlines: ", "two\nlines: "),
        ("ends with a line end\n", "ends with a line end\n"),
        ("abcd\rX: ", "X: d"),
        ("bell\x07 and back\x08space ", "bell and bacspace "),
        ("", ""),
    ],
)
def test_a_prompt_is_shown_as_output_is(prompt: str, shown: str) -> None:
    assert normalized_text(prompt) == shown
