"""Benchmark of the output log: 1,000,000 streamed lines, a mid-log range read, and searches."""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from loomgate.gateway.records.line_range import LineRange
from loomgate.gateway.records.output_log import LineLog, OutputKind
from loomgate.gateway.records.output_stream import OutputStream
from loomgate.gateway.records.search import Matcher, search_log

LINES = 1_000_000
READ_RANGE = "500000:500019"
READ_REPEATS = 50
NEEDLE = "needle-in-the-haystack"


def stream_text() -> str:
    """Return LINES lines of training-log-like output, some coloured, one holding NEEDLE."""
    rng = random.Random(7)
    lines = []
    for i in range(LINES):
        loss = rng.random()
        if i % 10 == 0:
            lines.append(f"\x1b[32mstep {i:>7}\x1b[0m loss={loss:.4f} lr=3.0e-04 ✓")
        else:
            lines.append(f"step {i:>7} loss={loss:.4f} grad_norm={loss * 3:.3f}")
    lines[LINES * 3 // 4] += f" {NEEDLE}"
    return "\n".join(lines) + "\n"


def chunks(data: bytes) -> list[bytes]:
    """Return data cut at arbitrary points into 200 B - 8 KiB pieces, like kernel messages."""
    rng = random.Random(11)
    pieces, start = [], 0
    while start < len(data):
        size = rng.randint(200, 8192)
        pieces.append(data[start : start + size])
        start += size
    return pieces


def timed_search(log: LineLog, matcher: Matcher) -> float:
    """Return the seconds one search over the whole log takes, once its one match is checked:
    the line holding NEEDLE, with two lines of context either side."""
    began = time.perf_counter()
    result = search_log(log, matcher, context=2)
    elapsed = time.perf_counter() - began
    assert result.matches == 1 and not result.truncated, result
    [group] = result.groups
    needle_line = LINES * 3 // 4 + 1  # numbered from 1
    assert [hit.number for hit in group] == list(range(needle_line - 2, needle_line + 3)), group
    [hit] = [hit for hit in group if hit.marker == "M"]
    assert hit.number == needle_line and hit.text.endswith(f" {NEEDLE}"), hit
    return elapsed


def main() -> None:
    """Build the log, time the operations, and print them as a table."""
    pieces = chunks(stream_text().encode())
    with tempfile.TemporaryDirectory() as directory:
        log = LineLog(Path(directory) / "combined")
        stream = OutputStream(log)
        began = time.perf_counter()
        for piece in pieces:
            stream.write(piece, OutputKind.STDOUT)
        stream.finish()
        log.flush()
        append = time.perf_counter() - began
        assert log.count == LINES

        lo, hi = LineRange.parse(READ_RANGE).resolve(log.total)
        reads = []
        for _ in range(READ_REPEATS):
            began = time.perf_counter()
            lines = log.read(lo, hi)
            reads.append(time.perf_counter() - began)
        assert [line.number for line in lines] == list(range(lo + 1, hi + 1)), lines[:2]
        assert all(line.text.startswith(f"step {line.number - 1:>7} ") for line in lines)

        size = f"{len(pieces):,} chunks, {log.byte_size / 1e6:.1f} MB"
        rows = [
            (f"append {LINES:,} lines ({size})", append),
            (f"read {READ_RANGE} (median of {READ_REPEATS})", statistics.median(reads)),
            ("literal search", timed_search(log, Matcher.build(NEEDLE, "literal"))),
            (
                "literal search, ignore case",
                timed_search(log, Matcher.build(NEEDLE.upper(), "literal", True)),
            ),
            ("regex search", timed_search(log, Matcher.build(r"needle-\w+", "regex"))),
        ]
        log.close()
    width = max(len(name) for name, _ in rows)
    print(f"{'operation':<{width}}  {'time':>10}")
    for name, seconds in rows:
        shown = f"{seconds * 1e3:.3f} ms" if seconds < 0.1 else f"{seconds:.3f} s"
        print(f"{name:<{width}}  {shown:>10}")


if __name__ == "__main__":
    main()
