"""What the flush before a rich output's index line costs: a figure's record work (its stand-in
line, its bundle file, its rich.jsonl line) timed inside the gateway's own record code, with
that flush as it is and switched off, side by side in one run.

`uv run python -m bench.rich_index_bench [--figures 2000] [--out FILE]`: blocks of 100 figures
(a small PNG with its text stand-in, as matplotlib's display sends) alternate between a record
that flushes and one whose combined log's flush is a no-op. Before it reports, it checks that
both records index every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.journal_bench import new_store, side_rows
from loomgate.gateway.records.record import ExecutionRecord
from tests.support.cells import PNG_BYTES

BLOCK = 100
BUNDLE = {"text/plain": "<Figure size 640x480 with 1 Axes>", "image/png": ""}


def one_figure(record: ExecutionRecord, png: str) -> float:
    """Return the seconds one figure's record work takes."""
    began = time.perf_counter()
    record.write_bundle({**BUNDLE, "image/png": png}, {}, result=False)
    return time.perf_counter() - began


async def measure(figures: int) -> dict[str, list[float]]:
    """Return the per-figure seconds of each side, in alternating blocks."""
    png = base64.b64encode(PNG_BYTES).decode()
    times: dict[str, list[float]] = {"flush": [], "no flush": []}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as directory:
        store = new_store(Path(directory), "figures")
        records = {
            side: store.new_record(number=0, msg_id=side, code="plots()", source="loomgate")
            for side in times
        }
        for side, record in records.items():
            record.write_bundle({"text/plain": "first"}, {}, result=False)  # makes its streams
            if side == "no flush":
                # The one switch: the combined log's flush before each index line does nothing.
                record.streams["combined"].log.flush = lambda: None  # type: ignore[method-assign]
        for block in range(figures // BLOCK):
            for side in times if block % 2 == 0 else reversed(list(times)):
                times[side] += [one_figure(records[side], png) for _ in range(BLOCK)]
            await asyncio.sleep(0)  # the records' deferred saves run between blocks
        for record in records.values():
            record.set_state("completed")
        await asyncio.sleep(0.3)  # their deferred saves, before the directory goes
        for side, record in records.items():
            index = record.directory / "rich.jsonl"
            assert sum(1 for line in index.read_text().splitlines() if json.loads(line)) == len(
                times[side]
            ), side
    return times


def report(times: dict[str, list[float]]) -> str:
    """Return the table of both sides and their difference."""
    flush, off = (statistics.median(times[s]) * 1e6 for s in ("flush", "no flush"))
    return "\n".join(
        [
            f"## A figure's record work ({len(times['flush'])} figures each, blocks of {BLOCK} "
            "alternating)",
            "",
            "| before its index line | µs per figure, median | p90 |",
            "|---|---|---|",
            *side_rows(times, ("no flush", "flush")),
            "",
            f"Added per figure by the flush: {flush - off:.1f} µs ({flush / off:.3f}×).",
        ]
    )


def main() -> None:
    """Run the bench and print (or write) its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--figures", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = report(asyncio.run(measure(args.figures)))
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
