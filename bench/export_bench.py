"""Notebook export benchmark: the time and size of `GET …/notebook` for a kernel of 1,000
executions and for a 1,000,000-line cell, on a real gateway and kernel.

Run: `uv run --frozen python -m bench.export_bench [--rounds 5] [--out bench/results/export.md]`

Each export is first checked to be what it should be (nbformat accepts it; its cell count; each
cell's number and output lines; the long cell's head, tail and the line naming the rest), then
timed `--rounds` times: the whole HTTP request as a client sees it, the notebook parsed from the
answer (median and range). `loomgate export -o FILE` is timed once per kernel size, as a person
runs it (a new Python process each time, its start-up included).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import nbformat

from tests.support.gateways import GatewayProcess

API = "/api/loomgate/kernels"
EXECUTIONS = 1_000
BIG_LINES = 1_000_000
MAX_LINES = 10_000  # the gateway's default limit of one cell's output
# What the 1,000 cells are: mostly prints, every 10th a result, every 100th an HTML display.
HTML = "from IPython.display import HTML, display\ndisplay(HTML('<b>cell {i}</b>'))"


def code_of(i: int) -> str:
    """Return the source of cell `i` (0-based) of the 1,000."""
    if i % 100 == 99:
        return HTML.format(i=i)
    if i % 10 == 9:
        return f"{i} * 2"
    return f"print('cell', {i})"


async def run(http: httpx.AsyncClient, kernel: str, code: str) -> dict[str, Any]:
    """Run `code` to its end; return its execution."""
    r = await http.post(f"{API}/{kernel}/executions", json={"code": code, "wait": 600})
    assert r.status_code == 201, r.text
    execution: dict[str, Any] = r.json()["execution"]
    assert execution["state"] == "completed", execution
    return execution


async def timed_export(
    http: httpx.AsyncClient, kernel: str, rounds: int, **params: Any
) -> tuple[list[float], int, dict[str, Any]]:
    """Return the times (s) of `rounds` exports, the answer's size in bytes, and the notebook
    (checked by nbformat)."""
    times, size, text = [], 0, ""
    for _ in range(rounds):
        started = time.perf_counter()
        r = await http.get(f"{API}/{kernel}/notebook", params=params)
        text = r.text
        times.append(time.perf_counter() - started)
        assert r.status_code == 200, text[:500]
        size = len(r.content)
    book = nbformat.reads(text, as_version=4)
    nbformat.validate(book)
    return times, size, dict(book)


def check_thousand(book: dict[str, Any]) -> None:
    """Fail unless `book` holds the 1,000 cells as they ran."""
    cells = book["cells"]
    assert len(cells) == EXECUTIONS, len(cells)
    for i, cell in enumerate(cells):
        assert (cell["execution_count"], cell["source"]) == (i + 1, code_of(i)), cell
        [output] = cell["outputs"]
        if i % 100 == 99:
            assert output["data"]["text/html"] == f"<b>cell {i}</b>", output
        elif i % 10 == 9:
            assert output["data"] == {"text/plain": str(i * 2)}, output
        else:
            assert output["text"] == f"cell {i}\n", output


def check_big(book: dict[str, Any], number: int) -> None:
    """Fail unless `book` holds the 1,000,000-line cell as its head, the line naming the rest,
    and its tail."""
    [cell] = book["cells"]
    head, note, tail = cell["outputs"]
    half = MAX_LINES // 2
    assert head["text"].splitlines() == [str(i) for i in range(half)]
    assert tail["text"].splitlines() == [str(i) for i in range(BIG_LINES - half, BIG_LINES)]
    first, last = half + 1, BIG_LINES - half
    assert note["data"]["text/plain"].endswith(f"--lines {first}:{last}"), note
    assert cell["metadata"]["loomgate"]["lines"] == BIG_LINES
    assert cell["metadata"]["loomgate"]["omitted"] == {"first": first, "last": last}
    assert cell["execution_count"] == number


def cli_export(gateway: GatewayProcess, kernel: str, out: Path, *args: str) -> float:
    """Return the seconds `loomgate export --kernel K -o OUT ARGS` took, start-up included."""
    env = {**os.environ, "LOOMGATE_URL": gateway.url, "LOOMGATE_TOKEN": gateway.token}
    command = [sys.executable, "-m", "loomgate.translator.cli", "export", "--kernel", kernel]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "-o", str(out), *args], env=env, capture_output=True, text=True, timeout=600
    )
    took = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    return took


def spread(values: list[float]) -> str:
    """Return the median and range of `values`, in ms."""
    ms = [v * 1000 for v in values]
    return f"{statistics.median(ms):.0f} ({min(ms):.0f}–{max(ms):.0f})"


async def measure(gateway: GatewayProcess, rounds: int, work: Path) -> list[str]:
    """Return the result table's lines."""
    async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers, timeout=600) as h:
        r = await h.post(API, json={"name": "export-bench"})
        kernel = r.json()["kernel"]["id"]
        try:
            started = time.perf_counter()
            for i in range(EXECUTIONS):
                await run(h, kernel, code_of(i))
            filled = time.perf_counter() - started
            thousand, thousand_size, book = await timed_export(h, kernel, rounds)
            check_thousand(book)
            cli_thousand = cli_export(gateway, kernel, work / "thousand.ipynb")
            big = await run(h, kernel, f"for i in range({BIG_LINES}): print(i)")
            number = big["number"]
            assert big["streams"]["combined"]["lines"] == BIG_LINES
            one, one_size, book = await timed_export(h, kernel, rounds, executions=str(number))
            check_big(book, number)
            both, both_size, book = await timed_export(h, kernel, rounds)
            assert len(book["cells"]) == EXECUTIONS + 1
            check_thousand({"cells": book["cells"][:EXECUTIONS]})
            check_big({"cells": book["cells"][EXECUTIONS:]}, number)
            cli_both = cli_export(gateway, kernel, work / "both.ipynb")
        finally:
            await h.delete(f"{API}/{kernel}")
    return [
        f"## Notebook export ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores)",
        "",
        f"A kernel of {EXECUTIONS:,} executions (filled in {filled:.1f} s), then one cell "
        f"printing {BIG_LINES:,} lines (exported as its first and last {MAX_LINES // 2:,} and "
        f"the line naming the rest). `GET …/notebook`, {rounds} rounds each, every notebook "
        "checked first (nbformat, cell count, each cell's lines):",
        "",
        "| export | cells | ms, median (range) | size | `loomgate export -o` (one run) |",
        "|---|---|---|---|---|",
        f"| the {EXECUTIONS:,} executions | {EXECUTIONS:,} | {spread(thousand)} | "
        f"{thousand_size / 1e6:.2f} MB | {cli_thousand * 1000:.0f} ms |",
        f"| the {BIG_LINES:,}-line cell alone (`executions={number}`) | 1 | {spread(one)} | "
        f"{one_size / 1e6:.2f} MB |  |",
        f"| both | {EXECUTIONS + 1:,} | {spread(both)} | {both_size / 1e6:.2f} MB | "
        f"{cli_both * 1000:.0f} ms |",
    ]


async def main() -> None:
    """Measure, print and (with --out) write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        gateway = GatewayProcess(Path(work) / "state")
        gateway.state_dir.mkdir()
        gateway.start()
        try:
            lines = await measure(gateway, args.rounds, Path(work))
        finally:
            gateway.stop()
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    asyncio.run(main())
