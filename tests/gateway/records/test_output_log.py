"""Tests for the on-disk line log, the stream writer that feeds it, and clip_line."""

from __future__ import annotations

import resource
import signal
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import pytest

from loomgate.gateway.records.output_log import (
    PART_START,
    Line,
    LineLog,
    OutputKind,
    clip_line,
)
from loomgate.gateway.records.output_stream import OutputStream
from tests.support.cells import texts

FIVE = ["one", "two", "three", "four", "five"]


def entries(*offsets: int) -> bytes:
    """Return index entries (tag 0) for the given offsets."""
    return array("Q", offsets).tobytes()


@pytest.fixture(params=["written here", "reopened"])
def five(tmp_path: Path, request: pytest.FixtureRequest) -> LineLog:
    """Return a log holding FIVE (tag 1) and the pending line "six" (tag 2): written in this
    process (read from memory) or reopened from its files (read from them)."""
    log = LineLog(tmp_path / "five")
    log.append(FIVE[:2], tag=1)
    log.append(FIVE[2:], tag=1)
    if request.param == "reopened":
        log.close()
        log = LineLog(tmp_path / "five")
    log.set_pending("six", tag=2)
    return log


# (lo, hi, expected texts)
READS: list[tuple[int, int, list[str]]] = [
    (0, 6, [*FIVE, "six"]),
    (0, 100, [*FIVE, "six"]),
    (-3, 2, ["one", "two"]),
    (1, 3, ["two", "three"]),
    (4, 5, ["five"]),
    (4, 6, ["five", "six"]),
    (5, 6, ["six"]),
    (6, 7, []),
    (3, 3, []),
    (4, 2, []),
]


@pytest.mark.parametrize(("lo", "hi", "expected"), READS)
def test_read(five: LineLog, lo: int, hi: int, expected: list[str]) -> None:
    lines = five.read(lo, hi)
    assert texts(lines) == expected
    first = max(lo, 0) + 1
    assert [line.number for line in lines] == list(range(first, first + len(lines)))
    assert [line.partial for line in lines] == [line.text == "six" for line in lines]
    assert [line.tag for line in lines] == [2 if line.text == "six" else 1 for line in lines]


@pytest.mark.parametrize(
    ("n", "expected"),
    [(0, []), (-1, []), (1, ["six"]), (3, ["four", "five", "six"]), (99, [*FIVE, "six"])],
)
def test_tail(five: LineLog, n: int, expected: list[str]) -> None:
    assert texts(five.tail(n)) == expected


# (pending text, total, what the last read line is)
PENDING: list[tuple[str | None, int, str]] = [
    ("six", 6, "six"),
    ("", 5, "five"),
    (None, 5, "five"),
]


@pytest.mark.parametrize(("pending", "total", "last"), PENDING)
def test_pending(five: LineLog, pending: str | None, total: int, last: str) -> None:
    five.set_pending(pending)
    assert (five.count, five.total) == (5, total)
    assert texts(five.tail(1)) == [last]
    assert five.byte_size == len("\n".join(FIVE)) + 1


def test_pending_from_callable(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "log")
    current = ["abc"]
    log.set_pending(lambda: current[0], tag=3)
    assert log.read(0, 1) == [Line(1, "abc", 3, partial=True)]
    current[0] = ""
    assert (log.total, log.read(0, 1)) == (0, [])


def test_tags_and_first_tag(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "log")
    log.append(["a", "b", "c"], tag=OutputKind.RESULT, first_tag=OutputKind.RESULT | PART_START)
    log.append(["d"], tag=OutputKind.STDERR, first_tag=0xFF)
    log.append(["e"])
    assert [(line.text, line.tag) for line in log.read(0, 5)] == [
        ("a", 0x83),
        ("b", 3),
        ("c", 3),
        ("d", 0xFF),
        ("e", 0),
    ]


@pytest.mark.parametrize(("tag", "first_tag"), [(256, None), (-1, None), (1, 0x100), (1, -2)])
def test_append_rejects_tags_beyond_a_byte(tmp_path: Path, tag: int, first_tag: int | None) -> None:
    log = LineLog(tmp_path / "log")
    with pytest.raises(ValueError, match="byte"):
        log.append(["x"], tag=tag, first_tag=first_tag)
    assert log.count == 0


def test_index_format(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "log")
    log.append(["ab", "", "cde"], tag=OutputKind.STDERR, first_tag=OutputKind.ERROR | PART_START)
    log.close()
    raw = (tmp_path / "log.idx").read_bytes()
    assert raw == b"".join(
        ((tag << 56) | offset).to_bytes(8, "little") for offset, tag in [(0, 0x85), (3, 2), (4, 2)]
    )


@pytest.mark.parametrize(
    "lines",
    [["a\nb"], ["ok", "bad\n"], ["\n"], ["fine", "\nbad"]],
    ids=["inside", "at end", "alone", "at start"],
)
def test_append_rejects_newlines(tmp_path: Path, lines: list[str]) -> None:
    log = LineLog(tmp_path / "log")
    log.append(["kept"])
    with pytest.raises(ValueError, match="newline"):
        log.append(lines)
    assert (log.count, texts(log.read(0, 10))) == (1, ["kept"])


def test_non_ascii_and_unencodable_text(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "log")
    log.append(["héllo", "日本語", "\ud800x", "", "𝄞 end"])
    assert texts(log.read(0, 5)) == ["héllo", "日本語", "?x", "", "𝄞 end"]
    assert texts(log.read(2, 4)) == ["?x", ""]
    expected = "héllo\n日本語\n?x\n\n𝄞 end\n".encode()
    assert log.byte_size == len(expected)
    log.close()
    assert (tmp_path / "log.txt").read_bytes() == expected


def test_files_are_created_lazily(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "sub" / "log")
    log.set_pending("x")
    assert texts(log.read(0, 5)) == ["x"]
    log.append([])
    log.flush()
    log.close()
    assert not (tmp_path / "sub").exists()
    log.append(["first"])
    assert (tmp_path / "sub" / "log.txt").exists()
    assert (tmp_path / "sub" / "log.idx").exists()


def test_reopen_after_close(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "log")
    log.append(["a", "b"], tag=1)
    log.close()
    assert texts(log.read(0, 5)) == ["a", "b"]
    log.append(["c"], tag=2)
    assert texts(log.read(1, 5)) == ["b", "c"]
    log.close()
    log.close()
    again = LineLog(tmp_path / "log")
    assert (again.count, again.byte_size) == (3, 6)
    assert [(line.text, line.tag) for line in again.read(0, 5)] == [("a", 1), ("b", 1), ("c", 2)]
    again.append(["d"])
    assert texts(again.tail(2)) == ["c", "d"]


# (id, bytes appended to the data file, bytes appended to the index (None: delete the file),
#  delete the data file, lines kept)
CRASHES: list[tuple[str, bytes, bytes | None, bool, list[str]]] = [
    ("clean", b"", b"", False, ["one", "two", "three"]),
    ("dangling entry at data end", b"", entries(14), False, ["one", "two", "three"]),
    ("dangling entry past data end", b"", entries(100), False, ["one", "two", "three"]),
    ("several dangling entries", b"", entries(14, 20, 30), False, ["one", "two", "three"]),
    ("unindexed partial line", b"fou", b"", False, ["one", "two", "three"]),
    ("unindexed complete line", b"four\n", b"", False, ["one", "two", "three"]),
    ("indexed partial line", b"fo", entries(14), False, ["one", "two", "three"]),
    ("torn index entry", b"four\n", entries(14)[:4], False, ["one", "two", "three"]),
    (
        "indexed line then partial",
        b"four\nfi",
        entries(14, 19),
        False,
        ["one", "two", "three", "four"],
    ),
    ("index lost", b"", None, False, []),
    ("data lost", b"", b"", True, []),
]


@pytest.mark.parametrize(
    ("data_tail", "index_tail", "lose_data", "kept"),
    [c[1:] for c in CRASHES],
    ids=[c[0] for c in CRASHES],
)
def test_reopen_truncates_crash_debris(
    tmp_path: Path, data_tail: bytes, index_tail: bytes | None, lose_data: bool, kept: list[str]
) -> None:
    stem = tmp_path / "log"
    log = LineLog(stem)
    log.append(["one", "two", "three"])
    log.close()
    data, index = Path(f"{stem}.txt"), Path(f"{stem}.idx")
    data.write_bytes(data.read_bytes() + data_tail)
    if index_tail is None:
        index.unlink()
    else:
        index.write_bytes(index.read_bytes() + index_tail)
    if lose_data:
        data.unlink()

    reopened = LineLog(stem)
    size = sum(len(text) + 1 for text in kept)
    assert (reopened.count, reopened.total, reopened.byte_size) == (len(kept), len(kept), size)
    assert texts(reopened.read(0, 10)) == kept
    assert data.stat().st_size == size if data.exists() else size == 0
    assert index.stat().st_size == 8 * len(kept) if index.exists() else not kept

    reopened.append(["after"])
    reopened.close()
    assert texts(LineLog(stem).read(0, 10)) == [*kept, "after"]


@pytest.mark.parametrize(
    ("lo", "size"), [(500_000, "big"), (0, "big"), (999_980, "big"), (40, "small")]
)
def test_range_read_on_big_and_small_logs(
    tmp_path: Path, big_log: LineLog, big_line: Callable[[int], str], lo: int, size: str
) -> None:
    if size == "big":
        log = big_log
    else:
        log = LineLog(tmp_path / "small")
        log.append([big_line(i) for i in range(100)], tag=1)
    lines = log.read(lo, lo + 20)
    assert lines == [Line(i + 1, big_line(i), 1) for i in range(lo, lo + 20)]


def test_a_small_log_written_here_is_read_from_memory(tmp_path: Path) -> None:
    """Its files can go (or be slow): reads of a small log begun here never touch them."""
    log = LineLog(tmp_path / "small")
    log.append(["first", "second"], tag=3)
    log.flush()
    for suffix in (".txt", ".idx"):
        (tmp_path / f"small{suffix}").unlink()
    assert log.read(0, 5) == [Line(1, "first", 3), Line(2, "second", 3)]


@pytest.mark.parametrize("lines", [["shown"], [f"line {i}" for i in range(20_000)]])
def test_lines_a_read_returned_are_on_disk(tmp_path: Path, lines: list[str]) -> None:
    """Whatever a client was shown survives a crash of the gateway that showed it."""
    log = LineLog(tmp_path / "seen")
    log.append(lines)
    assert texts(log.read(0, len(lines))) == lines
    assert texts(LineLog(tmp_path / "seen").read(0, len(lines))) == lines  # the files alone


@pytest.mark.parametrize("line_bytes", [10, 1000, 70_000])
def test_a_log_that_outgrows_memory_reads_from_its_files(tmp_path: Path, line_bytes: int) -> None:
    """Past 64 KiB the log is read from disk; every line reads the same either side of that."""
    log = LineLog(tmp_path / "growing")
    lines = [f"{i:06d}" + "x" * line_bytes for i in range(200)]
    for start in range(0, 200, 7):
        log.append(lines[start : start + 7], tag=1)
        assert texts(log.read(0, start + 7)) == lines[: start + 7]
    for lo in (0, 1, 50, 199):
        assert texts(log.read(lo, lo + 3)) == lines[lo : lo + 3]
    log.close()
    assert texts(LineLog(tmp_path / "growing").read(0, 200)) == lines


def test_big_log_tail(big_log: LineLog, big_line: Callable[[int], str]) -> None:
    assert big_log.count == 1_000_000
    assert texts(big_log.tail(2)) == [big_line(999_998), big_line(999_999)]


LONG = "x" * 50
ITER_LINES = ["a", "", "bb", LONG, "ccc", "é日", "d", ""]


@pytest.mark.parametrize("block_bytes", [1, 3, 8, 60, 1 << 20])
@pytest.mark.parametrize("start", [0, 1, 3, 7, 8, 20])
def test_iter_committed(tmp_path: Path, block_bytes: int, start: int) -> None:
    log = LineLog(tmp_path / "log")
    log.append(ITER_LINES[:3])
    log.append(ITER_LINES[3:])
    log.set_pending("not committed")
    seen: list[str] = []
    for first, lines in log.iter_committed(start, block_bytes):
        assert first == start + len(seen)
        assert lines
        seen.extend(lines)
    assert seen == ITER_LINES[start:]


Step = tuple[Literal["write", "block", "finish"], str | bytes, int]
# (id, steps: (what to call, its data, its tag), resulting lines as (text, tag, partial))
STREAMS: list[tuple[str, list[Step], list[tuple[str, int, bool]]]] = [
    (
        "same tag continues",
        [("write", "ab", 1), ("write", "c\nd", 1)],
        [("abc", 1, False), ("d", 1, True)],
    ),
    (
        "tag switch commits",
        [("write", "out", 1), ("write", "err\n", 2)],
        [("out", 1, False), ("err", 2, False)],
    ),
    (
        "tag switch, nothing pending",
        [("write", "a\n", 1), ("write", "b\n", 2)],
        [("a", 1, False), ("b", 2, False)],
    ),
    (
        "switching back and forth",
        [("write", "a", 1), ("write", "b", 2), ("write", "c\n", 1)],
        [("a", 1, False), ("b", 2, False), ("c", 1, False)],
    ),
    (
        "tag switch flushes a split character",
        [("write", b"x\xe2\x82", 1), ("write", b"\xac\n", 2)],
        [("x\ufffd", 1, False), ("\ufffd", 2, False)],
    ),
    (
        "carriage return stays pending",
        [("write", "10%\r", 1), ("write", "50%", 1)],
        [("50%", 1, True)],
    ),
    (
        "escape split across writes",
        [("write", "a\x1b[3", 1), ("write", "1mb", 1)],
        [("ab", 1, True)],
    ),
    (
        "block commits pending, marks its start",
        [("write", "partial", 1), ("block", "r1\nr2\n", 3)],
        [("partial", 1, False), ("r1", 3 | PART_START, False), ("r2", 3, False)],
    ),
    ("empty block adds nothing", [("block", "", 3)], []),
    (
        "block is normalized",
        [("block", "\x1b[31mred\x1b[0m\rR", 5)],
        [("Red", 5 | PART_START, False)],
    ),
    (
        "each block starts a part",
        [("block", "a", 3), ("block", "b\nc", 4)],
        [("a", 3 | PART_START, False), ("b", 4 | PART_START, False), ("c", 4, False)],
    ),
    (
        "write after block",
        [("block", "x", 3), ("write", "y", 1)],
        [("x", 3 | PART_START, False), ("y", 1, True)],
    ),
    ("finish commits pending", [("write", "tail", 2), ("finish", "", 0)], [("tail", 2, False)]),
    (
        "finish with nothing pending",
        [("write", "done\n", 2), ("finish", "", 0)],
        [("done", 2, False)],
    ),
]


@pytest.mark.parametrize(
    ("steps", "expected"), [c[1:] for c in STREAMS], ids=[c[0] for c in STREAMS]
)
def test_output_stream(
    tmp_path: Path, steps: list[Step], expected: list[tuple[str, int, bool]]
) -> None:
    stream = OutputStream(LineLog(tmp_path / "log"))
    for call, data, tag in steps:
        if call == "write":
            stream.write(data, tag)
        elif call == "block":
            assert isinstance(data, str)
            stream.write_block(data, tag)
        else:
            stream.finish()
    lines = stream.log.read(0, 100)
    assert [(line.text, line.tag, line.partial) for line in lines] == expected
    assert stream.log.total == len(expected)


@pytest.mark.timeout(120)
def test_ten_megabyte_line_through_output_stream(tmp_path: Path) -> None:
    stream = OutputStream(LineLog(tmp_path / "log"))
    chunk = b"0123456789abcdef" * 64
    for _ in range(10 * 1024):
        stream.write(chunk, OutputKind.STDOUT)
    expected = chunk.decode() * 10 * 1024
    assert (stream.log.count, stream.log.total) == (0, 1)
    assert stream.log.read(0, 1) == [Line(1, expected, OutputKind.STDOUT, partial=True)]
    stream.finish()
    assert stream.log.read(0, 1) == [Line(1, expected, OutputKind.STDOUT)]
    assert stream.log.byte_size == len(expected) + 1


@pytest.mark.timeout(120)
def test_ten_megabytes_of_colored_lines_through_output_stream(tmp_path: Path) -> None:
    rows = 360_000
    data = "".join(f"\x1b[3{i % 8}mrow {i} é\x1b[0m\tvalue\r\n" for i in range(rows)).encode()
    assert len(data) > 10_000_000
    stream = OutputStream(LineLog(tmp_path / "log"))
    for i in range(0, len(data), 1024):
        stream.write(data[i : i + 1024], OutputKind.STDERR)
    stream.finish()
    expected = [f"row {i} é\tvalue" for i in range(rows)]
    assert stream.log.count == rows
    assert [line for _, block in stream.log.iter_committed() for line in block] == expected
    assert stream.log.read(123_456, 123_458) == [
        Line(123_457, expected[123_456], OutputKind.STDERR),
        Line(123_458, expected[123_457], OutputKind.STDERR),
    ]


# (text, max_chars, clipped text, chars removed)
CLIPS: list[tuple[str, int | None, str, int]] = [
    ("hello", None, "hello", 0),
    ("hello", 10, "hello", 0),
    ("hello", 5, "hello", 0),
    ("hello", 3, "hel", 2),
    ("hello", 0, "", 5),
    ("", 0, "", 0),
    ("日本語テキスト", 2, "日本", 5),
]


@pytest.mark.parametrize(("text", "max_chars", "clipped", "removed"), CLIPS)
def test_clip_line(text: str, max_chars: int | None, clipped: str, removed: int) -> None:
    assert clip_line(text, max_chars) == (clipped, removed)


def test_clip_line_rejects_negative_limit() -> None:
    with pytest.raises(ValueError, match="at least 0"):
        clip_line("hello", -1)


@pytest.mark.parametrize(
    ("cap", "line"),
    [
        (4_096, "short "),
        (100_000, "a longer line of output " * 4),
        (700_000, "é漢字🙂" * 50),
        (50_000, ""),  # lines shorter than their index entries: the index fills first
    ],
)
def test_a_refused_write_freezes_the_log_whole(tmp_path: Path, cap: int, line: str) -> None:
    """A file-size cap (like a full disk) stops the log at a flush that is whole on disk."""
    log = LineLog(tmp_path / "s")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
    resource.setrlimit(resource.RLIMIT_FSIZE, (cap, hard))
    try:
        with pytest.raises(OSError):
            for i in range(1_000_000):
                log.append([f"{line}{i}"])
                if i % 1000 == 999:
                    log.flush()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    kept = log.count
    expected = [f"{line}{i}" for i in range(kept)]
    assert log.write_error is not None
    assert [x.text for x in log.read(0, kept + 5)] == expected
    with pytest.raises(OSError):
        log.append(["after the failure"])
    log.close()
    reopened = LineLog(tmp_path / "s")
    assert reopened.count == kept
    assert [x.text for x in reopened.read(0, kept + 5)] == expected


def test_invalid_utf8_on_disk_reads_as_replacement_characters(tmp_path: Path) -> None:
    (tmp_path / "raw.txt").write_bytes(b"\xff ok\nnext\n")
    (tmp_path / "raw.idx").write_bytes(entries(0, 5))
    log = LineLog(tmp_path / "raw")
    assert texts(log.read(0, 2)) == ["\ufffd ok", "next"]
    assert [lines for _, lines in log.iter_committed()] == [["\ufffd ok", "next"]]


def test_a_newline_in_a_line_is_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as refused:
        LineLog(tmp_path / "log").append(["a\nb"])
    assert str(refused.value) == "A log line must not contain a newline character."


def test_after_a_refused_write_appends_name_the_error_and_the_file(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "s")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
    resource.setrlimit(resource.RLIMIT_FSIZE, (4_096, hard))
    try:
        with pytest.raises(OSError):
            for i in range(100_000):
                log.append([f"line {i}"])
                log.flush()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    first = log.write_error
    assert first is not None
    with pytest.raises(OSError) as again:
        log.append(["after the failure"])
    error = again.value
    assert (error.errno, error.strerror, error.filename) == (
        first.errno,
        first.strerror,
        str(tmp_path / "s.txt"),
    )
    assert error.errno is not None and error.strerror
    log.close()


def test_a_log_creates_the_folders_it_lives_in(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "a" / "b" / "log")
    log.append(["kept"])
    log.close()
    assert texts(LineLog(tmp_path / "a" / "b" / "log").read(0, 5)) == ["kept"]


@pytest.mark.parametrize("last", [[""], ["", ""], ["x", ""]])
def test_empty_last_lines_survive_a_reopen(tmp_path: Path, last: list[str]) -> None:
    log = LineLog(tmp_path / "log")
    log.append(["first", *last])
    log.close()
    reopened = LineLog(tmp_path / "log")
    assert texts(reopened.read(0, 10)) == ["first", *last]


def test_a_pending_line_set_without_a_tag_has_none(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "log")
    log.set_pending("tagged", 5)
    log.set_pending("plain")
    [line] = log.read(0, 5)
    assert (line.text, line.tag, line.partial) == ("plain", 0, True)


def test_stream_output_written_without_a_tag_has_none(tmp_path: Path) -> None:
    stream = OutputStream(LineLog(tmp_path / "log"))
    stream.write("a\nb")
    assert [(x.text, x.tag, x.partial) for x in stream.log.read(0, 5)] == [
        ("a", 0, False),
        ("b", 0, True),
    ]


@pytest.mark.parametrize(("text", "max_chars"), [("hello", 5), ("", 0), ("hi", 2)])
def test_a_line_exactly_at_the_limit_is_not_clipped(text: str, max_chars: int) -> None:
    assert clip_line(text, max_chars) == (text, 0)


def test_a_read_that_cannot_flush_shows_what_is_on_disk(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "s")
    log.append(["kept"])
    log.flush()
    log.append(["x" * 10_000])  # buffered: it reaches the file at the read's flush
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
    resource.setrlimit(resource.RLIMIT_FSIZE, (4_096, hard))
    try:
        shown = log.read(0, 5)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert texts(shown) == ["kept"]
    assert log.write_error is not None
    log.close()


def test_tags_with_the_high_bit_read_back_from_disk(tmp_path: Path) -> None:
    log = LineLog(tmp_path / "log")
    log.append(["start", "more"], tag=3, first_tag=3 | PART_START)
    log.append(["top"], tag=0xFF)
    log.close()
    reopened = LineLog(tmp_path / "log")
    assert [(x.text, x.tag) for x in reopened.read(0, 5)] == [
        ("start", 3 | PART_START),
        ("more", 3),
        ("top", 0xFF),
    ]
