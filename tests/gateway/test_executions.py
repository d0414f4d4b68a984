"""Submitting cells through /api/loomgate/: records, numbering, busy, interrupt, reset, input."""

from __future__ import annotations

import base64
import re

import httpx
import pytest

from loomgate.gateway.kernels.execution_tracker import INTERRUPT_RECHECK
from tests.support.cells import PNG_BYTES, output_texts, run
from tests.support.gates import Gate
from tests.support.sse import events, next_event

API = "/api/loomgate/kernels"


async def test_record_streams_and_kinds(http: httpx.AsyncClient, kernel: str) -> None:
    code = (
        "import sys\n"
        "print('out', flush=True)\n"
        "print('err', file=sys.stderr, flush=True)\n"
        "print('a\\nb')\n"
        "6*7"
    )
    execution = await run(http, kernel, code)
    assert execution["state"] == "completed"
    assert execution["source"] == "loomgate"
    assert output_texts(execution) == ["out", "err", "a", "b", "42"]
    kinds = [line.get("kind") for line in execution["output"]["head"]]
    assert kinds == ["stdout", "stderr", "stdout", "stdout", "result"]
    streams = execution["streams"]
    assert streams["stdout"]["lines"] == 3
    assert streams["stderr"]["lines"] == 1
    assert streams["result"]["lines"] == 1
    r = await http.get(f"{API}/{kernel}/executions/{execution['number']}/streams/stdout")
    assert [line["text"] for line in r.json()["lines"]] == ["out", "a", "b"]


async def test_numbers_follow_ipython_count(http: httpx.AsyncClient, kernel: str) -> None:
    numbers = [(await run(http, kernel, code))["number"] for code in ("x = 0", "x = 1", "40+2")]
    assert numbers == [1, 2, 3]
    execution = await run(http, kernel, "Out[3], _3, _ih[3]")
    assert execution["number"] == 4
    assert output_texts(execution) == ["(42, 42, '40+2')"]


async def test_error_is_a_state_with_traceback(http: httpx.AsyncClient, kernel: str) -> None:
    execution = await run(http, kernel, "def f():\n    raise ValueError('bad')\nf()")
    assert execution["state"] == "error"
    assert execution["error"] == {"name": "ValueError", "value": "bad"}
    lines = output_texts(execution)
    assert "ValueError: bad" in lines[-1]
    assert any(line.startswith("Cell In[1]") for line in lines)
    assert not any("\x1b" in line for line in lines)
    assert execution["streams"]["traceback"]["lines"] == len(lines)


async def test_busy_refusal_names_running_execution(http: httpx.AsyncClient, kernel: str) -> None:
    r = await http.post(f"{API}/{kernel}/executions", json={"code": "import time; time.sleep(30)"})
    assert r.status_code == 201
    running = r.json()["execution"]["number"]
    r = await http.post(f"{API}/{kernel}/executions", json={"code": "1"})
    assert r.status_code == 409
    assert r.json()["error"] == "busy"
    assert r.json()["running"] == running
    named = re.fullmatch(
        r"kernel is busy running execution (\d+); wait for it, or interrupt it",
        r.json()["message"],
    )
    assert named is not None and int(named[1]) == running, r.json()["message"]
    r = await http.post(f"{API}/{kernel}/interrupt")
    assert r.status_code == 200
    r = await http.get(f"{API}/{kernel}/executions/{running}", params={"wait": 30})
    assert r.json()["execution"]["state"] == "interrupted"
    # The refused cell was not queued: the next number follows the interrupted one.
    assert (await run(http, kernel, "1"))["number"] == running + 1


async def test_interrupt_right_after_submit_is_never_lost(
    http: httpx.AsyncClient, kernel: str
) -> None:
    for _ in range(20):
        r = await http.post(
            f"{API}/{kernel}/executions", json={"code": "import time; time.sleep(60)"}
        )
        assert r.status_code == 201, r.text
        number = r.json()["execution"]["number"]
        r = await http.post(f"{API}/{kernel}/interrupt")
        assert r.status_code == 200, r.text
        r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30})
        assert r.json()["execution"]["state"] == "interrupted", r.json()


async def test_a_cell_that_catches_the_interrupt_completes(
    http: httpx.AsyncClient, kernel: str, gate: Gate
) -> None:
    code = (
        "try:\n"
        "    print('ready', flush=True)\n"
        f"    {gate.wait}\n"
        "except KeyboardInterrupt:\n"
        "    print('caught')\n"
        "'done'"
    )
    r = await http.post(f"{API}/{kernel}/executions", json={"code": code})
    number = r.json()["execution"]["number"]
    r = await http.get(
        f"{API}/{kernel}/executions/{number}", params={"wait": 30, "until_silent": 0.2, "head": 5}
    )
    assert output_texts(r.json()["execution"]) == ["ready"]
    r = await http.post(f"{API}/{kernel}/interrupt")
    assert r.status_code == 200
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30, "head": 5})
    execution = r.json()["execution"]
    assert (execution["state"], execution["note"]) == ("completed", None)
    assert output_texts(execution) == ["ready", "caught", "'done'"]


async def test_interrupt_with_nothing_running_is_a_conflict(
    http: httpx.AsyncClient, kernel: str
) -> None:
    r = await http.post(f"{API}/{kernel}/interrupt")
    assert r.status_code == 409
    assert "nothing is running" in r.json()["message"]


async def test_reset_keeps_records_and_numbering(http: httpx.AsyncClient, kernel: str) -> None:
    await run(http, kernel, "x = 1")
    r = await http.post(f"{API}/{kernel}/executions", json={"code": "import time; time.sleep(60)"})
    running = r.json()["execution"]["number"]
    r = await http.post(f"{API}/{kernel}/reset")
    assert r.status_code == 200, r.text
    assert r.json()["killed"]["number"] == running
    r = await http.get(f"{API}/{kernel}/executions/{running}")
    assert r.json()["execution"]["state"] == "killed"
    execution = await run(http, kernel, "x")
    assert execution["number"] == running + 1
    assert execution["error"]["name"] == "NameError"
    await assert_ipython_counts_from(http, kernel, running + 2)
    r = await http.get(f"{API}/{kernel}/executions/1/streams/combined")
    assert r.status_code == 200


async def test_ipython_numbering_continues_after_a_kernel_death(
    http: httpx.AsyncClient, kernel: str
) -> None:
    await run(http, kernel, "1")
    # Flushing first: a kernel that exits at once may never send the cell's execute_input.
    died = await run(http, kernel, "import os\nprint('going', flush=True)\nos._exit(1)")
    assert died["state"] == "died"
    await assert_ipython_counts_from(http, kernel, died["number"] + 1)


# The next shell request ends the kernel in ipykernel's hook before its handler: before the
# cell's execute_input, so the gateway never sees it start.
DIE_ON_NEXT_REQUEST = "import os\nget_ipython().kernel.pre_handler_hook = lambda: os._exit(1)"


async def test_a_cell_the_kernel_died_with_before_it_started_has_a_record(
    http: httpx.AsyncClient, kernel: str
) -> None:
    armed = await run(http, kernel, DIE_ON_NEXT_REQUEST)
    assert armed["state"] == "completed", armed
    async with events(http, kernel) as stream:
        died = await run(http, kernel, "never_started = True")
        await next_event(stream, "kernel", kernel_id=kernel, phase="ready")
    assert (died["state"], died["number"]) == ("died", armed["number"] + 1), died
    assert died["code"] == "never_started = True"
    r = await http.get(f"{API}/{kernel}/executions/{died['number']}")
    record = r.json()["execution"]
    assert "before the cell was seen to start" in record["note"], record
    assert "restarted" in record["note"], record  # told once the restart brought it back
    after = await run(http, kernel, "'never_started' in dir()")
    assert after["number"] == died["number"] + 1
    assert output_texts(after) == ["False"]


async def assert_ipython_counts_from(http: httpx.AsyncClient, kernel: str, number: int) -> None:
    """Check that IPython itself numbers the next cells from `number`: its traceback's
    `Cell In[N]`, `Out[N]`, `_N`, `In[N]` and its own execution counter."""
    failed = await run(http, kernel, "1 / 0")
    assert failed["number"] == number
    cells = [line for line in output_texts(failed) if line.startswith("Cell In[")]
    assert cells == [f"Cell In[{number}], line 1"], output_texts(failed)
    shown = await run(http, kernel, "41 + 1")
    assert shown["number"] == number + 1
    n = number + 1
    seen = await run(http, kernel, f"Out[{n}], _{n}, In[{n}], get_ipython().execution_count")
    assert seen["number"] == number + 2
    # Inside cell N a fresh ipykernel's counter already reads N + 1; so must a seeded one's.
    assert output_texts(seen) == [f"(42, 42, '41 + 1', {number + 3})"]


async def test_input_answered_through_endpoint(http: httpx.AsyncClient, kernel: str) -> None:
    r = await http.post(
        f"{API}/{kernel}/executions",
        json={"code": "name = input('who? ')\nprint('hi', name)", "wait": 30},
    )
    execution = r.json()["execution"]
    assert r.json()["returned"] == "input"
    assert execution["state"] == "awaiting_input"
    assert execution["input"] == {"prompt": "who? ", "password": False}
    number = execution["number"]
    r = await http.post(f"{API}/{kernel}/executions/{number}/input", json={"value": "ada"})
    assert r.status_code == 200
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30, "head": 10})
    assert r.json()["execution"]["state"] == "completed"
    assert output_texts(r.json()["execution"])[-1] == "hi ada"


async def test_password_prompt_is_flagged(http: httpx.AsyncClient, kernel: str) -> None:
    code = "import getpass\nsecret = getpass.getpass('pw: ')\nlen(secret)"
    r = await http.post(f"{API}/{kernel}/executions", json={"code": code, "wait": 30})
    execution = r.json()["execution"]
    assert execution["input"] == {"prompt": "pw: ", "password": True}
    r = await http.post(f"{API}/{kernel}/executions/current/input", json={"value": "abc"})
    assert r.status_code == 200
    r = await http.get(f"{API}/{kernel}/executions/current", params={"wait": 30, "head": 5})
    assert output_texts(r.json()["execution"]) == ["3"]


@pytest.mark.parametrize(
    "code", ["input('who? ')", "import getpass\ngetpass.getpass('pw: ')"], ids=["input", "getpass"]
)
async def test_an_interrupt_withdraws_the_input_request_until_the_cell_ends(
    http: httpx.AsyncClient, kernel: str, code: str
) -> None:
    r = await http.post(f"{API}/{kernel}/executions", json={"code": code, "wait": 30})
    assert r.json()["returned"] == "input"
    number = r.json()["execution"]["number"]
    r = await http.post(f"{API}/{kernel}/interrupt")
    assert r.status_code == 200
    assert (r.json()["execution"]["state"], r.json()["execution"]["input"]) == ("running", None)
    r = await http.post(f"{API}/{kernel}/executions/{number}/input", json={"value": "late"})
    assert (r.status_code, r.json()["state"]) == (409, "running")  # nothing to answer any more
    # The long poll follows the record to the KeyboardInterrupt, as after any interrupt.
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30})
    assert r.json()["returned"] == "final"
    assert r.json()["execution"]["state"] == "interrupted"
    r = await http.post(f"{API}/{kernel}/executions", json={"code": "1", "wait": 30})
    assert r.status_code == 201, r.text  # the kernel is free at once


async def test_a_cell_that_asks_again_after_an_interrupt_waits_for_input_again(
    http: httpx.AsyncClient, kernel: str
) -> None:
    code = "try:\n    input('first? ')\nexcept KeyboardInterrupt:\n    print(input('again? '))"
    r = await http.post(f"{API}/{kernel}/executions", json={"code": code, "wait": 30})
    number = r.json()["execution"]["number"]
    await http.post(f"{API}/{kernel}/interrupt")
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30})
    assert r.json()["returned"] == "input"
    assert r.json()["execution"]["input"] == {"prompt": "again? ", "password": False}
    r = await http.post(f"{API}/{kernel}/executions/{number}/input", json={"value": "yes"})
    assert r.status_code == 200
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30, "head": 5})
    assert r.json()["execution"]["state"] == "completed"
    assert output_texts(r.json()["execution"]) == ["yes"]


async def test_an_interrupt_of_a_cell_in_input_is_sent_once(
    http: httpx.AsyncClient, kernel: str
) -> None:
    # Sent within EARLY_INTERRUPT of the cell's start, a running cell's interrupt is repeated
    # while no output shows it landed; one in input() lands at once, and a repeat would break
    # what the cell does next (its traceback's printing, here a silent sleep).
    code = (
        "try:\n    input('who? ')\nexcept KeyboardInterrupt:\n"
        f"    import time\n    time.sleep({INTERRUPT_RECHECK * 3})\n    print('undisturbed')"
    )
    r = await http.post(f"{API}/{kernel}/executions", json={"code": code, "wait": 30})
    assert r.json()["returned"] == "input"
    number = r.json()["execution"]["number"]
    await http.post(f"{API}/{kernel}/interrupt")
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30, "head": 5})
    assert r.json()["execution"]["state"] == "completed", r.json()["execution"]
    assert output_texts(r.json()["execution"]) == ["undisturbed"]


async def test_input_when_not_waiting_is_a_conflict(http: httpx.AsyncClient, kernel: str) -> None:
    await run(http, kernel, "1")
    r = await http.post(f"{API}/{kernel}/executions/1/input", json={"value": "x"})
    assert r.status_code == 409


async def test_long_poll_returns_on_completion_and_on_silence(
    http: httpx.AsyncClient, kernel: str, gate: Gate
) -> None:
    code = f"print('start', flush=True)\n{gate.wait}\nprint('end')"
    r = await http.post(f"{API}/{kernel}/executions", json={"code": code})
    number = r.json()["execution"]["number"]
    r = await http.get(
        f"{API}/{kernel}/executions/{number}", params={"wait": 30, "until_silent": 0.5}
    )
    assert r.json()["returned"] == "silent"
    assert r.json()["execution"]["state"] == "running"
    gate.open()
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30, "head": 5})
    assert r.json()["returned"] == "final"
    assert output_texts(r.json()["execution"]) == ["start", "end"]


async def test_running_record_shows_partial_output(http: httpx.AsyncClient, kernel: str) -> None:
    code = "import sys, time\nsys.stdout.write('50%')\nsys.stdout.flush()\ntime.sleep(30)"
    async with events(http, kernel) as stream:
        r = await http.post(f"{API}/{kernel}/executions", json={"code": code})
        number = r.json()["execution"]["number"]
        event = await next_event(stream, "output")
    assert event["number"] == number
    assert event["last_line"] == "50%"
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"tail": 3})
    tail = r.json()["execution"]["output"]["head"]
    assert tail == [{"n": 1, "text": "50%", "kind": "stdout", "partial": True}]
    await http.post(f"{API}/{kernel}/interrupt")


async def test_display_and_images_are_rich_outputs(http: httpx.AsyncClient, kernel: str) -> None:
    code = (
        "from IPython.display import display, Image\n"
        f"display(Image(data={PNG_BYTES!r}))\n"
        "display('shown')\n"
        "print('after')\n"
        "'result'"
    )
    execution = await run(http, kernel, code)
    kinds = [(line["kind"], line["text"]) for line in execution["output"]["head"]]
    assert kinds == [
        ("rich", "<IPython.core.display.Image object>"),
        ("display", "'shown'"),
        ("stdout", "after"),
        ("result", "'result'"),
    ]
    assert len(execution["rich"]) == 1
    rich = execution["rich"][0]
    assert rich["line"] == 1
    assert "image/png" in rich["mimetypes"]
    r = await http.get(f"{API}/{kernel}/executions/{execution['number']}/rich/0")
    assert base64.b64decode(r.json()["data"]["image/png"]) == PNG_BYTES
    r = await http.get(f"{API}/{kernel}/executions/{execution['number']}/rich/1")
    assert r.status_code == 404


@pytest.mark.parametrize(
    ("path", "params", "status", "fragment"),
    [
        ("executions/99", {}, 404, "no execution 99"),
        ("executions/abc", {}, 400, "must be a number"),
        ("executions/1/streams/bogus", {}, 400, "unknown stream"),
        ("executions/1/streams/combined", {"lines": "5:3"}, 400, "5:3"),
        ("executions/1/streams/combined", {"lines": "0"}, 400, "start at 1"),
        ("executions/1/streams/combined", {"lines": "x"}, 400, "'x'"),
        ("executions/1/streams/combined", {"max_chars": "-1"}, 400, "max_chars"),
        ("executions/1", {"wait": "soon"}, 400, "wait must be a number"),
        ("search", {"query": "(", "mode": "regex"}, 400, "regular expression"),
        ("search", {}, 400, "query is required"),
    ],
)
async def test_bad_requests_are_clear(
    http: httpx.AsyncClient, kernel: str, path: str, params: dict, status: int, fragment: str
) -> None:
    await run(http, kernel, "print('line')")
    r = await http.get(f"{API}/{kernel}/{path}", params=params)
    assert r.status_code == status, r.text
    assert fragment in r.json()["message"]


async def test_read_ranges_and_clipping(http: httpx.AsyncClient, kernel: str) -> None:
    execution = await run(http, kernel, "for i in range(1, 101): print(f'line {i} ' + 'x' * 50)")
    url = f"{API}/{kernel}/executions/{execution['number']}/streams/combined"
    for lines, expected in [
        (":3", [1, 2, 3]),
        ("-2:", [99, 100]),
        ("50:51", [50, 51]),
        ("7", [7]),
        ("200:300", []),
    ]:
        r = await http.get(url, params={"lines": lines})
        assert [line["n"] for line in r.json()["lines"]] == expected, lines
        assert r.json()["total"] == 100
    r = await http.get(url, params={"lines": "1:1", "max_chars": 6})
    assert r.json()["lines"][0] == {"n": 1, "text": "line 1", "kind": "stdout", "clipped": 51}


async def test_search_one_and_all(http: httpx.AsyncClient, kernel: str) -> None:
    await run(http, kernel, "for i in range(10): print('alpha' if i == 4 else f'row {i}')")
    await run(http, kernel, "print('beta\\nALPHA')")
    r = await http.get(f"{API}/{kernel}/search", params={"query": "alpha", "execution": "all"})
    groups = r.json()["groups"]
    assert [(g["execution"], [line["n"] for line in g["lines"]]) for g in groups] == [(1, [5])]
    r = await http.get(
        f"{API}/{kernel}/search",
        params={"query": "alpha", "execution": "all", "ignore_case": "true", "context": 1},
    )
    groups = r.json()["groups"]
    assert [(g["execution"], [(x["n"], x["marker"]) for x in g["lines"]]) for g in groups] == [
        (1, [(4, "C"), (5, "M"), (6, "C")]),
        (2, [(1, "C"), (2, "M")]),
    ]
    r = await http.get(
        f"{API}/{kernel}/search", params={"query": "row \\d", "execution": "1", "max_matches": 3}
    )
    assert r.json()["matches"] == 3
    assert r.json()["truncated"] is True
    assert r.json()["mode"] == "literal or regex"


async def test_input_at_the_start_of_a_cell_is_never_missed(
    http: httpx.AsyncClient, kernel: str
) -> None:
    # stdin's input_request may overtake IOPub's execute_input; both orders must work.
    for i in range(20):
        r = await http.post(f"{API}/{kernel}/executions", json={"code": "input('v? ')", "wait": 30})
        execution = r.json()["execution"]
        assert execution["state"] == "awaiting_input", (i, execution)
        r = await http.post(
            f"{API}/{kernel}/executions/{execution['number']}/input", json={"value": str(i)}
        )
        assert r.status_code == 200
        r = await http.get(
            f"{API}/{kernel}/executions/{execution['number']}", params={"wait": 30, "head": 1}
        )
        assert output_texts(r.json()["execution"]) == [repr(str(i))]


@pytest.mark.parametrize("blank", ["", "   \n\t"])
async def test_blank_cells_keep_numbers_in_step(
    http: httpx.AsyncClient, kernel: str, blank: str
) -> None:
    assert (await run(http, kernel, blank))["number"] == 1
    assert (await run(http, kernel, blank))["number"] == 2
    execution = await run(http, kernel, "1/0")
    assert execution["number"] == 3
    assert any(line.startswith("Cell In[3]") for line in output_texts(execution))
    assert output_texts(await run(http, kernel, "7"))[-1] == "7"
    assert output_texts(await run(http, kernel, "_4, len(In)"))[-1] == "(7, 6)"


async def test_create_or_get_refuses_a_different_spec(http: httpx.AsyncClient) -> None:
    r = await http.post(API, json={"name": "spec-check"})
    try:
        r = await http.post(API, json={"name": "spec-check", "kernel_spec": "python3"})
        assert r.status_code == 200
        r = await http.post(API, json={"name": "spec-check", "kernel_spec": "other"})
        assert r.status_code == 409
        assert "already runs kernel spec 'python3'" in r.json()["message"]
        r = await http.post(API, json={"name": "spec-check", "lifetime": "forever"})
        assert r.status_code == 400
    finally:
        await http.delete(f"{API}/spec-check")
