"""A kernel's setup: parts registered once, run silently (no number), again after every start."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.support.cells import output_texts, run
from tests.support.gates import Gate

API = "/api/loomgate/kernels"


def part(name: str, code: str) -> dict[str, str]:
    """Return one setup part."""
    return {"name": name, "code": code}


async def put(http: httpx.AsyncClient, kernel: str, *parts: dict[str, str], wait: float = 30):
    """Register `parts` as the kernel's setup; return the reply's JSON."""
    r = await http.put(f"{API}/{kernel}/setup", json={"parts": list(parts), "wait": wait})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"parts": "x"},
        {"parts": [{"name": "a"}]},
        {"parts": [{"name": "a", "code": 1}]},
        {"parts": [{"name": "a", "code": "", "extra": 1}]},
        {"parts": [{"name": "a", "code": "", "runs_in": 1}]},
        {"parts": [{"name": "a", "code": "", "required": "yes"}]},
    ],
)
async def test_a_malformed_setup_is_refused(
    http: httpx.AsyncClient, kernel: str, body: dict
) -> None:
    r = await http.put(f"{API}/{kernel}/setup", json=body)
    assert r.status_code == 400
    assert r.json()["message"] == (
        'parts must be a list of {"name": str, "code": str, "runs_in": str, "required": bool} '
        "objects (runs_in and required optional)"
    )


async def test_setup_runs_silently_once_and_reports_each_part(
    http: httpx.AsyncClient, kernel: str
) -> None:
    first = part("first.py", "import sys\nprint('hello')\nprint('warn', file=sys.stderr)")
    raising = part("raising.py", "1 / 0")
    caught = part(
        "caught.py", "get_ipython()._loomgate_setup_failure = 'it went wrong, said nicely'"
    )
    reply = await put(http, kernel, first, raising, caught)
    assert reply["ran"] is True
    results = reply["setup"]["results"]
    assert reply["setup"]["parts"] == ["first.py", "raising.py", "caught.py"]
    assert [(r["name"], r["state"]) for r in results] == [
        ("first.py", "ok"),
        ("raising.py", "failed"),
        ("caught.py", "failed"),
    ]
    assert results[0]["output"] == "hello\nwarn" and results[0]["failure"] is None
    assert results[1]["failure"].endswith("ZeroDivisionError: division by zero")
    assert "\x1b" not in results[1]["failure"]
    assert results[2]["failure"] == "it went wrong, said nicely"
    assert (await put(http, kernel, first, raising, caught))["ran"] is False
    assert (await put(http, kernel, first))["ran"] is True  # changed: runs, replaces
    # Silent: IPython counts no cell, loomgate records none.
    execution = await run(http, kernel, "get_ipython().execution_count")
    assert (execution["number"], output_texts(execution)) == (1, ["2"])
    r = await http.get(f"{API}/{kernel}")
    assert r.json()["kernel"]["setup"]["parts"] == ["first.py"]


async def test_setup_runs_again_after_every_restart(
    http: httpx.AsyncClient, kernel: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    counter = part("count.py", f"open({str(runs)!r}, 'a').write('x')\nready = True")
    await put(http, kernel, counter)
    await http.post(f"{API}/{kernel}/reset")
    assert output_texts(await run(http, kernel, "ready")) == ["True"]
    died = await run(http, kernel, "import os\nprint('bye', flush=True)\nos._exit(1)")
    assert died["state"] == "died"
    assert output_texts(await run(http, kernel, "ready")) == ["True"]
    assert runs.read_text() == "xxx"


async def test_cells_wait_for_a_slow_part(http: httpx.AsyncClient, kernel: str, gate: Gate) -> None:
    slow = part("slow.py", f"{gate.wait}\nsetting = 'done'")
    reply = await put(http, kernel, slow, wait=0.3)
    [result] = reply["setup"]["results"]
    assert result["state"] == "unfinished"
    assert result["failure"] == "still running after 0.3 s; cells wait for it"
    r = await http.post(f"{API}/{kernel}/executions", json={"code": "setting"})
    assert r.status_code == 409
    assert r.json()["message"] == (
        "the kernel is still running its setup (slow.py); try again when it has finished"
    )
    gate.open()
    again = await put(http, kernel, slow)  # waits for the run under way: it did not run again
    assert again["ran"] is False
    assert again["setup"]["results"][0]["state"] == "ok"
    assert output_texts(await run(http, kernel, "setting")) == ["'done'"]
