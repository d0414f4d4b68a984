"""A gateway SIGKILLed while it writes a record, between its file writes, and with the disk full
at that moment: the next gateway opens every record or says which one it could not, and loses
nothing else.

A record's files are written in this order (records/record.py, rich_outputs.py, journal.py):
its directory when IOPub announces the cell, then record.json (atomically: record.json.tmp,
renamed) in the loop turn after the submitter's 201; stream data and index every 0.2 s and
before any reply says it ended; a rich bundle's file, then its line in rich.jsonl; the
journal's lines (a sent cell before it is sent, an end before its reply); kernel.json
atomically too. `test_each_window_between_the_writes` builds the state each window leaves from
a real gateway's real records (a gateway SIGKILLed, then the files cut as a kill in that
window leaves them); the other two kill real gateways at random moments, and with a full disk.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import secrets
import shutil
from pathlib import Path
from typing import Any

import httpx

from loomgate.gateway.records.journal import Journal
from tests.support.figures import Figure, scaled
from tests.support.gateways import GatewayProcess, client, gateway_with_token
from tests.support.mounts import PrivateDisk
from tests.support.sandboxed_gateways import PROCESS_CELL, confined_gateway

API = "/api/loomgate/kernels"
SEED = 20261203
KILLS = scaled(8)
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEklEQVR4nGP4z8CAFWEXHbQSACj/P8Fu7N9h"
    "AAAAAElFTkSuQmCC"
)


def painting(flag: Path, every: int = 1) -> str:
    """Return a cell that prints numbered lines and shows a numbered figure every `every`
    lines, 50 a second, until `flag` exists; then it prints 'done'."""
    return (
        "import os, time\nfrom IPython.display import display\ni = 0\n"
        f"while not os.path.exists({str(flag)!r}):\n"
        "    print('line', i, flush=True)\n"
        f"    if i % {every} == 0:\n"
        f"        display({{'image/png': {PNG!r}, 'text/plain': f'figure {{i}}'}}, raw=True)\n"
        "    i += 1\n    time.sleep(0.02)\n"
        "print('done')"
    )


async def execution(http: httpx.AsyncClient, kernel: str, number: int, **query: Any) -> Any:
    """Return execution `number` of `kernel` (asserting it exists)."""
    r = await http.get(f"{API}/{kernel}/executions/{number}", params=query)
    assert r.status_code == 200, (number, r.text)
    return r.json()["execution"]


async def combined(http: httpx.AsyncClient, kernel: str, number: int) -> list[dict[str, Any]]:
    """Return every line of execution `number`'s combined stream."""
    lines: list[dict[str, Any]] = []
    while True:
        r = await http.get(
            f"{API}/{kernel}/executions/{number}/streams/combined",
            params={"lines": f"{len(lines) + 1}:{len(lines) + 10_001}"},
        )
        assert r.status_code == 200, r.text
        lines += r.json()["lines"]
        if not r.json()["truncated"]:
            return lines


async def whole(http: httpx.AsyncClient, kernel: str, number: int) -> dict[str, Any]:
    """Return what a client can read of a finished record: its summary (without the times
    that move) and every combined line and rich bundle."""
    summary = await execution(http, kernel, number)
    for moving in ("silent_for", "elapsed"):
        summary.pop(moving)
    bundles = []
    for entry in summary["rich"]:
        r = await http.get(f"{API}/{kernel}/executions/{number}/rich/{entry['index']}")
        assert r.status_code == 200, r.text
        bundles.append(r.json())
    return {"summary": summary, "lines": await combined(http, kernel, number), "rich": bundles}


async def check_rich_lines(http: httpx.AsyncClient, kernel: str, number: int) -> int:
    """Check that each rich output of execution `number` has its bundle and is named by its
    own stand-in line in `combined` (the bundle's text/plain, starting an output); return how
    many there are."""
    lines = await combined(http, kernel, number)
    summary = await execution(http, kernel, number)
    for entry in summary["rich"]:
        r = await http.get(f"{API}/{kernel}/executions/{number}/rich/{entry['index']}")
        assert r.status_code == 200, (number, entry, r.text)
        stand_in = r.json()["data"]["text/plain"]
        assert entry["line"] <= len(lines), (number, entry, "names a line not stored")
        line = lines[entry["line"] - 1]
        assert (line["text"], line.get("kind"), line.get("start")) == (stand_in, "rich", True), (
            number,
            entry,
            line,
        )
    return len(summary["rich"])


async def named_kernel(http: httpx.AsyncClient, name: str) -> tuple[str, str]:
    """Create kernel `name`; return its id and what tells its process from others (cell 1)."""
    r = await http.post(API, json={"name": name})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["kernel"]["id"]
    body = {"code": PROCESS_CELL, "wait": 60, "head": 1}
    r = await http.post(f"{API}/{name}/executions", json=body)
    assert r.status_code == 201, r.text
    return kernel_id, str(r.json()["execution"]["output"]["head"][0]["text"])


async def run(http: httpx.AsyncClient, kernel: str, code: str, **body: Any) -> Any:
    """Submit `code` to `kernel` (waiting up to 60 s unless `body` says); return the execution."""
    r = await http.post(f"{API}/{kernel}/executions", json={"code": code, "wait": 60, **body})
    assert r.status_code == 201, r.text
    return r.json()["execution"]


async def until_rich(http: httpx.AsyncClient, kernel: str, number: int, count: int) -> None:
    """Wait until execution `number` has at least `count` rich outputs on record."""
    while len((await execution(http, kernel, number, wait=0.2))["rich"]) < count:
        pass  # the long poll above waits on the record; nothing else announces a new output


def cut(path: Path, keep: float = 0.5) -> bytes:
    """Cut the file at `path` to `keep` of its bytes (as a write stopped midway leaves it);
    return the bytes it had."""
    data = path.read_bytes()
    path.write_bytes(data[: max(1, int(len(data) * keep))])
    return data


def cut_last_line(path: Path) -> None:
    """Cut the last line of a JSON-lines file in half, its newline gone too."""
    data = path.read_bytes()
    head, last = data.rstrip(b"\n").rsplit(b"\n", 1)
    path.write_bytes(head + b"\n" + last[: len(last) // 2])


def gateway_log(state: Path) -> str:
    """Return what the gateways of `state` logged."""
    return (state / "gateway.log").read_text("utf-8", "replace")


async def test_each_window_between_the_writes(tmp_path: Path, figure: Figure) -> None:
    state = tmp_path / "state"
    gateway = gateway_with_token(state, secrets.token_urlsafe(24))
    flag = tmp_path / "flag"
    try:
        gateway.start()
        async with client(gateway) as http:
            torn_id, torn_process = await named_kernel(http, "torn")
            await run(http, "torn", "for j in range(50): print('kept', j)")  # 2
            await run(http, "torn", painting(tmp_path / "never", every=2), wait=0.5)
            await http.post(f"{API}/torn/interrupt")  # 3: figures and lines, interrupted
            await execution(http, "torn", 3, wait=30)
            await run(http, "torn", "raise ValueError('kept')")  # 4
            running = await run(http, "torn", painting(flag, every=3), wait=0.5)  # 5
            await until_rich(http, "torn", 5, 4)
            unsaved_id, unsaved_process = await named_kernel(http, "unsaved")
            ticking = await run(http, "unsaved", painting(flag, every=10**9), wait=0.5)  # 2
            before = {n: await whole(http, "torn", n) for n in (1, 2, 3, 4)}
        assert running["state"] == ticking["state"] == "running"
        gateway.kill()  # the kernels run on; the next gateway takes them back

        torn = state / "kernels" / torn_id
        # A kill in write_json_atomic before its rename: record.json.tmp cut short beside the
        # whole older record.json (a finished record is rewritten by late output or an amend).
        (torn / "2" / "record.json.tmp").write_bytes((torn / "2" / "record.json").read_bytes())
        cut(torn / "2" / "record.json.tmp")
        (torn / "5" / "record.json.tmp").write_bytes((torn / "5" / "record.json").read_bytes())
        cut(torn / "5" / "record.json.tmp", 0.3)
        (torn / "kernel.json.tmp").write_bytes((torn / "kernel.json").read_bytes())
        cut(torn / "kernel.json.tmp")
        # A full disk that took part of a line: the last rich index line of the running cell
        # (its bundle's file was written before it), and a journal line.
        cut_last_line(torn / "5" / "rich.jsonl")
        indexed = (torn / "5" / "rich.jsonl").read_bytes().count(b"\n")
        with (torn / "journal.jsonl").open("ab") as journal:
            journal.write(b'{"sent":"m-torn","code":"print(')
        # Not a kill's doing (record.json is only ever renamed into place) but a disk error or
        # a power cut: a record.json that is not JSON any more.
        cut(torn / "4" / "record.json")

        unsaved = state / "kernels" / unsaved_id / "2"
        # A kill after the 201 ("running", number 2) and before the loop turn that writes the
        # first record.json: its directory, nothing flushed yet (that comes 0.2 s after the
        # first output), record.json.tmp cut short by the kill.
        saved = json.loads((unsaved / "record.json").read_text())
        for child in unsaved.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        (unsaved / "record.json.tmp").write_text(json.dumps(saved)[:40])
        meta = json.loads((unsaved.parent / "kernel.json").read_text())
        meta["last_number"] = min(meta["last_number"], 1)  # not saved past a record on disk
        (unsaved.parent / "kernel.json").write_text(json.dumps(meta))

        gateway.start()
        async with client(gateway) as http:
            # The torn record.json.tmp files and kernel.json.tmp are ignored: the records they
            # would have replaced read as before.
            for number in (1, 2, 3):
                assert await whole(http, "torn", number) == before[number], number
            # The one record that cannot be read is said, by kernel, number and reason.
            log = gateway_log(state)
            assert f"Cannot read record 4 of kernel {torn_id}" in log, log[-3000:]
            assert "Traceback" not in log, log[-5000:]
            assert (await http.get(f"{API}/torn/executions/4")).status_code == 404
            # The running cells are followed to their end, gap noted.
            await until_rich(http, "torn", 5, indexed + 3)
            flag.touch()
            for kernel, number, process in (
                ("torn", 5, torn_process),
                ("unsaved", 2, unsaved_process),
            ):
                ended = await execution(http, kernel, number, wait=60, tail=1)
                assert ended["state"] == "completed", ended
                assert ended["output"]["tail"][0]["text"] == "done", ended
                assert len(ended["gaps"]) == 1, ended
                code = painting(flag, every=3 if kernel == "torn" else 10**9)
                assert (ended["code"], ended["source"]) == (code, "loomgate"), ended
                after = await run(http, kernel, PROCESS_CELL, head=1)
                assert after["number"] == number + 1, after  # numbering goes on, no hole
                assert after["output"]["head"][0]["text"] == process  # the same kernel
            figures = await check_rich_lines(http, "torn", 5)
            assert [e["index"] for e in (await execution(http, "torn", 5))["rich"]] == list(
                range(figures)
            )
            after_restart = {
                (kernel, n): await whole(http, kernel, n)
                for kernel, numbers in (("torn", (1, 2, 3, 5, 6)), ("unsaved", (1, 2, 3)))
                for n in numbers
            }
        # The next gateway's own lines (journal, rich index) are whole, after the torn ones:
        # a gateway after it reads the same.
        gateway.kill()
        sends = {entry["code"] for entry in Journal(torn).sends()}
        assert PROCESS_CELL in sends
        assert {5, 6} <= set(Journal(torn).ends())
        gateway.start()
        async with client(gateway) as http:
            for (kernel, n), seen in after_restart.items():
                assert await whole(http, kernel, n) == seen, (kernel, n)
    finally:
        gateway.stop()
    figure(
        scenario="fault: gateway SIGKILL between a record's file writes (states built)",
        checked="record.json.tmp and kernel.json.tmp cut short, a rich index line and a "
        "journal line cut in half, a record whose first record.json was never written, a "
        "record.json that is not JSON: the next gateway reads every other record as before, "
        "names the one it cannot read, follows both running cells to their end with their "
        "code, keeps the numbering and the kernels, and its own journal and index lines read",
        records_checked=7,
        rich_outputs_checked=figures,
    )


async def test_random_kills_while_a_cell_writes_records(
    confined_root: Path, figure: Figure
) -> None:
    rng = random.Random(SEED)
    gateway = confined_gateway(confined_root, token=secrets.token_urlsafe(24))
    flag = confined_root / "flag"  # where the confined kernel sees it (not in /tmp)
    seen: dict[int, Any] = {}  # every execution a client saw end, as it saw it
    try:
        gateway.start()
        async with client(gateway) as http:
            _, process = await named_kernel(http, "painting")
            seen[1] = await whole(http, "painting", 1)
            painter = (await run(http, "painting", painting(flag), wait=0.3))["number"]
        for _ in range(KILLS):
            await asyncio.sleep(rng.uniform(0.05, 0.6))  # the schedule, not a wait
            gateway.kill_soon()
            gateway.kill_now()
            gateway.start()
        async with client(gateway) as http:
            await until_rich(http, "painting", painter, 1)
            flag.touch()
            ended = await execution(http, "painting", painter, wait=60, tail=1)
            assert ended["state"] == "completed", ended
            assert ended["output"]["tail"][0]["text"] == "done"
            assert 1 <= len(ended["gaps"]) <= KILLS, ended["gaps"]
            figures = await check_rich_lines(http, "painting", painter)
            lines = [line["text"] for line in await combined(http, "painting", painter)]
            printed = [int(text.split()[1]) for text in lines if text.startswith("line ")]
            assert printed == sorted(set(printed)), "no line is stored twice or out of order"
            # A line may be missing only where a gap says so: one run of them per gap at most.
            runs = sum(1 for a, b in itertools.pairwise(printed) if b != a + 1)
            assert runs <= len(ended["gaps"]), (runs, ended["gaps"])
            last = await run(http, "painting", PROCESS_CELL, head=1)
            assert last["number"] == painter + 1
            assert last["output"]["head"][0]["text"] == process
            assert await whole(http, "painting", 1) == seen[1]
    finally:
        gateway.stop()
    figure(
        scenario=f"fault: {KILLS} random gateway SIGKILLs while a cell writes lines and figures "
        f"(kernel under workspace, seed {SEED})",
        checked="the cell is followed through every restart to its end, `completed`; each of "
        "its figures has its bundle and its own stand-in line; no line stored twice or out of "
        "order, lines missing only at noted gaps; earlier records, numbering and the kernel kept",
        kills=KILLS,
        lines=len(printed),
        figures=figures,
        gaps=len(ended["gaps"]),
    )


async def test_a_full_disk_as_the_gateway_is_killed(tmp_path: Path, figure: Figure) -> None:
    disk = PrivateDisk(tmp_path / "state" / "kernels", "4m").start()
    token = secrets.token_urlsafe(24)

    def on_disk() -> GatewayProcess:
        state = tmp_path / "state"
        return gateway_with_token(state, token, launcher=disk.launcher, root=disk.root)

    gateway = on_disk()
    flag = tmp_path / "flag"
    try:
        gateway.start()
        async with client(gateway) as http:
            kernel_id, process = await named_kernel(http, "full")
            before = {1: await whole(http, "full", 1)}
            await run(http, "full", "for j in range(50): print('kept', j)")
            before[2] = await whole(http, "full", 2)
            running = await run(http, "full", painting(flag, every=2), wait=0.5)  # 3
            await until_rich(http, "full", 3, 2)
            # The disk fills while the cell runs (a few bytes left: writes are cut short),
            # and again after the streams gave back what they had not flushed whole.
            fillers = [disk.fill("filler-1", leave=100)]
            stopped = await execution(http, "full", 3, wait=2)
            fillers.append(disk.fill("filler-2"))
            flag.touch()
            told = await execution(http, "full", 3, wait=60)
        assert running["state"] == "running" and stopped["state"] == "running"
        assert told["state"] == "completed", told
        assert told["unstored"]["reason"] == "No space left on device", told
        gateway.kill_soon()
        gateway.kill_now()  # its end reached the reply, not the disk
        for filler in fillers:
            filler.unlink()
        gateway.start()
        async with client(gateway) as http:
            for number in (1, 2):
                assert await whole(http, "full", number) == before[number], number
            kept = await execution(http, "full", 3)
            log = gateway_log(tmp_path / "state")
            assert "Traceback" not in log, log[-5000:]
            # The one record whose end the disk refused: said by number, or read as the reply
            # told it.
            named = f"record 3 of kernel {kernel_id}" in log
            assert kept["state"] == "completed" or named, (kept, log[-3000:])
            assert kept["state"] != "running"
            figures = await check_rich_lines(http, "full", 3)
            after = await run(http, "full", PROCESS_CELL, head=1)
            assert after["number"] == 4 and after["output"]["head"][0]["text"] == process
    finally:
        gateway.stop()
        disk.stop()
    figure(
        scenario="fault: full disk as the gateway is SIGKILLed",
        checked="a cell runs on while the disk fills (writes cut short), its reply says "
        "completed and unstored; the gateway is killed before the disk frees; the next gateway "
        "reads the earlier records as before, reads the cell as its reply told or names it, "
        "each kept figure with its line; numbering and kernel kept",
        records_checked=3,
        figures_kept=figures,
        state_after_restart=kept["state"],
    )
