"""The export of a long session stays quick and small: the records of 1,000 executions and of a
1,000,000-line cell, stored on disk as a gateway stores them (no kernel), read back as a gone
kernel's are and exported whole within a stated time and size, every cell checked."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat

from bench.export_bench import BIG_LINES, EXECUTIONS, check_big, check_thousand, code_of
from loomgate.gateway.export.notebook import DEFAULT_MAX_LINES, NotebookSpec, notebook_file
from loomgate.gateway.export.selection import Selection
from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.records.stored_meta import KernelStart
from tests.gateway.export.test_notebook_cells import notebook

SPEC = NotebookSpec(name="python3", display_name="Python 3 (ipykernel)", language="python")
# Stated bounds, generous for a shared 2-core machine: bench/results/export.md measures about
# 0.1 s and 0.8 MB for this notebook through the gateway's HTTP answer.
MAX_SECONDS = 2.0
MAX_BYTES = 2_000_000
CHUNK = 10_000  # lines per stream message of the long cell, as a kernel batches its prints


def fill(store: RecordStore) -> None:
    """Store the records `bench.export_bench` makes on a real kernel: 1,000 cells (prints,
    every 10th a result, every 100th an HTML display), then the 1,000,000-line cell."""
    for i in range(EXECUTIONS):
        record = store.new_record(
            number=store.last_number + 1, msg_id=f"m{i}", code=code_of(i), source="loomgate"
        )
        if i % 100 == 99:
            html = {"text/html": f"<b>cell {i}</b>", "text/plain": "<IPython.core.display.HTML>"}
            record.write_bundle(html, {}, result=False)
        elif i % 10 == 9:
            record.write_bundle({"text/plain": str(i * 2)}, {}, result=True)
        else:
            record.write_stream("stdout", f"cell {i}\n")
        record.set_state("completed")
        record.save()
    big = store.new_record(
        number=store.last_number + 1,
        msg_id="big",
        code=f"for i in range({BIG_LINES}): print(i)",
        source="loomgate",
    )
    for start in range(0, BIG_LINES, CHUNK):
        big.write_stream("stdout", "".join(f"{n}\n" for n in range(start, start + CHUNK)))
    big.set_state("completed")
    big.save()
    store.save()


async def test_a_thousand_cells_and_a_million_lines_export_within_the_bounds(
    tmp_path: Path,
) -> None:
    start = KernelStart(
        id="k-1", name="long", lifetime="persistent", kernel_spec="python3", cwd=None, attached=None
    )
    fill(RecordStore.create(tmp_path / "k-1", start))
    stored = RecordStore.load(tmp_path / "k-1")  # as a gateway finds a gone kernel's records
    started = time.perf_counter()
    text = notebook_file(notebook(stored, SPEC, Selection(), DEFAULT_MAX_LINES))
    took = time.perf_counter() - started
    size = len(text.encode())
    book = nbformat.reads(text, as_version=4)
    nbformat.validate(book)
    assert len(book["cells"]) == EXECUTIONS + 1
    check_thousand({"cells": book["cells"][:EXECUTIONS]})
    check_big({"cells": book["cells"][EXECUTIONS:]}, EXECUTIONS + 1)
    assert took <= MAX_SECONDS, f"the export took {took:.2f} s (bound {MAX_SECONDS} s)"
    assert size <= MAX_BYTES, f"the notebook is {size:,} bytes (bound {MAX_BYTES:,})"
