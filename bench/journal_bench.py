"""The journal's cost on a cell's path: a record's submit line and its end line, timed inside
the gateway's own record code with the journal on and off, side by side in one run.

`uv run python -m bench.journal_bench [--cells 2000] [--out FILE]`: each cell is a record
created, given one output line and ended `completed`, as a `1+1` cell is; blocks of 100 cells
alternate between a store whose journal writes and one whose journal is switched off. Before
it reports, it checks that the journalled store's file holds every end and every send.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from loomgate.gateway.records.store import RecordStore

BLOCK = 100


def new_store(root: Path, name: str) -> RecordStore:
    """Return a fresh record store in `root`/`name`."""
    return RecordStore.create(
        root / name,
        {
            "id": name,
            "name": None,
            "lifetime": "persistent",
            "kernel_spec": "python3",
            "cwd": None,
            "attached": None,
            "sandbox": None,
        },
    )


def one_cell(store: RecordStore, journalled: bool, i: int) -> float:
    """Return the seconds one cell's record work takes: send, start, a line, its end."""
    began = time.perf_counter()
    if journalled:
        store.journal_sent(f"m{i}", "1+1", "bench")
    record = store.new_record(number=0, msg_id=f"m{i}", code="1+1", source="loomgate")
    if not journalled:
        record.on_end = None
    record.write_bundle({"text/plain": "2"}, {}, result=True)
    record.set_state("completed")
    return time.perf_counter() - began


async def measure(cells: int) -> dict[str, list[float]]:
    """Return the per-cell seconds of each side, in alternating blocks."""
    times: dict[str, list[float]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory(dir="/var/tmp") as directory:
        root = Path(directory)
        stores = {"on": new_store(root, "on"), "off": new_store(root, "off")}
        for block in range(cells // BLOCK):
            for side in ("on", "off") if block % 2 == 0 else ("off", "on"):
                for i in range(BLOCK):
                    number = block * BLOCK + i
                    times[side].append(one_cell(stores[side], side == "on", number))
                await asyncio.sleep(0)  # the records' deferred saves run between blocks
        await asyncio.sleep(0.3)
        lines = [
            json.loads(line) for line in (root / "on" / "journal.jsonl").read_text().splitlines()
        ]
        ends = sum(1 for line in lines if "end" in line)
        sends = sum(1 for line in lines if "sent" in line)
        assert ends == sends == len(times["on"]), (ends, sends, len(times["on"]))
        assert not (root / "off" / "journal.jsonl").exists()
    return times


def side_rows(times: dict[str, list[float]], sides: tuple[str, ...]) -> list[str]:
    """Return a table row per side: its median and p90, in µs."""
    return [
        f"| {side} | {statistics.median(times[side]) * 1e6:.1f} | "
        f"{sorted(times[side])[int(len(times[side]) * 0.9)] * 1e6:.1f} |"
        for side in sides
    ]


def report(times: dict[str, list[float]]) -> str:
    """Return the table of both sides and their difference."""
    on, off = (statistics.median(times[s]) * 1e6 for s in ("on", "off"))
    return "\n".join(
        [
            f"## The journal on a cell's record path ({len(times['on'])} cells each, "
            f"blocks of {BLOCK} alternating)",
            "",
            "| journal | µs per cell, median | p90 |",
            "|---|---|---|",
            *side_rows(times, ("off", "on")),
            "",
            f"Added per cell (the send line and the end line): {on - off:.1f} µs (goal ≤ 50 µs).",
        ]
    )


def main() -> None:
    """Run the bench and print (or write) its table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    text = report(asyncio.run(measure(args.cells)))
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
