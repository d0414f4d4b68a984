"""An interrupt that names its execution (POST …/interrupt {"execution": N}): it reaches only
that execution, so a person's button pressed as one cell ends never stops the next one."""

from __future__ import annotations

import httpx

from tests.support.cells import output_texts, run, submit
from tests.support.gates import Gate

API = "/api/loomgate/kernels"


async def test_an_interrupt_naming_an_ended_execution_leaves_the_running_one_alone(
    http: httpx.AsyncClient, kernel: str, gate: Gate
) -> None:
    ended = (await run(http, kernel, "x = 1"))["number"]
    code = f"print('started', flush=True)\n{gate.wait}\nprint('undisturbed')"
    running = (await submit(http, kernel, code, wait=0))["execution"]["number"]
    r = await http.post(f"{API}/{kernel}/interrupt", json={"execution": ended})
    assert r.status_code == 409, r.text
    assert r.json() == {
        "error": "conflict",
        "message": f"execution {ended} is not running; nothing was interrupted",
        "running": running,
        "number": ended,
        "state": "completed",
    }
    gate.open()
    r = await http.get(f"{API}/{kernel}/executions/{running}", params={"wait": 30, "head": 5})
    execution = r.json()["execution"]
    assert (execution["state"], execution["error"]) == ("completed", None)
    assert output_texts(execution) == ["started", "undisturbed"]


async def test_an_interrupt_naming_the_running_execution_interrupts_it(
    http: httpx.AsyncClient, kernel: str
) -> None:
    number = (await submit(http, kernel, "import time; time.sleep(60)", wait=0))["execution"][
        "number"
    ]
    r = await http.post(f"{API}/{kernel}/interrupt", json={"execution": number})
    assert r.status_code == 200, r.text
    assert r.json()["execution"]["number"] == number
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30})
    assert r.json()["execution"]["state"] == "interrupted"
    # Nothing runs now: naming the interrupted execution is refused, naming none as before.
    again = await http.post(f"{API}/{kernel}/interrupt", json={"execution": number})
    assert again.status_code == 409
    assert (again.json()["running"], again.json()["state"]) == (None, "interrupted")
    plain = await http.post(f"{API}/{kernel}/interrupt")
    assert plain.json()["message"] == "nothing is running on this kernel"


async def test_an_interrupt_naming_an_unknown_execution_is_not_found(
    http: httpx.AsyncClient, kernel: str
) -> None:
    await run(http, kernel, "1")
    r = await http.post(f"{API}/{kernel}/interrupt", json={"execution": 99})
    assert (r.status_code, r.json()["error"]) == (404, "not_found")
    bad = await http.post(f"{API}/{kernel}/interrupt", json={"execution": "two"})
    assert (bad.status_code, bad.json()["error"]) == (400, "bad_request")
