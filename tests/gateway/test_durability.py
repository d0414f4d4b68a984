"""Records survive gateway restarts and kernel deaths; conversation kernels follow their grace."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from jupyter_client.asynchronous.client import AsyncKernelClient

from loomgate.gateway.records.last_seen import LAST_SEEN_FILE
from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.gateway import GatewayClient
from tests.gateway.test_prewarm import slow_kernel_spec
from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess, alive, client, wait_gone
from tests.support.sse import events, next_event

API = "/api/loomgate/kernels"


async def test_records_survive_gateway_sigkill(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "durable"})
        kernel = r.json()["kernel"]["id"]
        code = "for i in range(1000): print('kept', i)"
        r = await http.post(f"{API}/durable/executions", json={"code": code, "wait": 60})
        assert r.json()["execution"]["state"] == "completed"
        code = "import time\nprint('before the crash', flush=True)\ntime.sleep(120)"
        r = await http.post(
            f"{API}/durable/executions", json={"code": code, "wait": 60, "until_silent": 0.5}
        )
        assert r.json()["execution"]["state"] == "running"
    fresh_gateway.kill()  # the kernel keeps running; the next gateway takes it back
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.get(API)
        [back] = [k for k in r.json()["kernels"] if k["id"] == kernel]
        assert back["state"] == "busy" and back["executions"] == 2
        r = await http.get(f"{API}/durable/executions/1/streams/combined", params={"lines": "-1:"})
        assert r.json()["lines"][0]["text"] == "kept 999"
        assert r.json()["total"] == 1000
        r = await http.get(f"{API}/durable/executions/2", params={"head": 5})
        execution = r.json()["execution"]
        assert execution["state"] == "running"
        assert [x["text"] for x in execution["output"]["head"]] == ["before the crash"]
        assert [gap["after_line"] for gap in execution["gaps"]] == [1]
        r = await http.post(f"{API}/durable/executions", json={"code": "1"})
        assert r.status_code == 409 and r.json()["running"] == 2
        await http.post(f"{API}/durable/interrupt")
        r = await http.get(f"{API}/durable/executions/2", params={"wait": 30})
        assert r.json()["execution"]["state"] == "interrupted"


async def kernel_pid(http: httpx.AsyncClient, kernel: str) -> int:
    """Return the process id of `kernel`."""
    r = await http.post(
        f"{API}/{kernel}/executions", json={"code": "import os; os.getpid()", "wait": 30, "head": 1}
    )
    return int(r.json()["execution"]["output"]["head"][0]["text"])


@pytest.mark.parametrize(
    ("how", "reason"),
    [("exit", "exited with code 3"), ("sigkill", "killed by SIGKILL")],
)
async def test_kernel_death_mid_cell(
    gateway: GatewayProcess, http: httpx.AsyncClient, kernel: str, how: str, reason: str
) -> None:
    pid = await kernel_pid(http, kernel)
    async with events(http, kernel) as stream:
        if how == "exit":
            code = "import os, time\nprint('going', flush=True)\ntime.sleep(0.2)\nos._exit(3)"
        else:
            code = "import time\nprint('going', flush=True)\ntime.sleep(120)"
        r = await http.post(f"{API}/{kernel}/executions", json={"code": code})
        number = r.json()["execution"]["number"]
        await next_event(stream, "output")
        if how == "sigkill":
            os.kill(pid, signal.SIGKILL)
        r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 60})
        assert r.json()["execution"]["state"] == "died"
        await next_event(stream, "kernel", phase="ready")
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"head": 5})
    execution = r.json()["execution"]
    assert reason in execution["died"]["reason"]
    assert execution["died"]["cause"] == ("exit" if how == "exit" else "signal")
    assert execution["died"]["restarted"] is True
    assert "restarted" in execution["note"]
    assert [x["text"] for x in execution["output"]["head"]] == ["going"]
    assert not alive(pid)
    r = await http.post(
        f"{API}/{kernel}/executions", json={"code": "'alive'", "wait": 30, "head": 1}
    )
    assert r.json()["execution"]["number"] == number + 1
    assert r.json()["execution"]["output"]["head"][0]["text"] == "'alive'"
    assert await kernel_pid(http, kernel) != pid


async def test_conversation_kernel_stops_after_grace(
    fresh_gateway: GatewayProcess, gate: Gate
) -> None:
    fresh_gateway.extra_args = ["--conversation-grace", "1"]
    fresh_gateway.start()
    async with client(fresh_gateway) as http, events(http) as watcher:
        # Each kernel is held as soon as it exists (an unheld conversation kernel stops once
        # the grace has passed), and released in reverse order: the control kernel goes last.
        r = await http.post(API, json={"lifetime": "conversation"})
        control = r.json()["kernel"]["id"]
        async with events(http, control, hold=True):
            r = await http.post(API, json={"lifetime": "conversation", "name": "conv"})
            kernel = r.json()["kernel"]["id"]
            async with events(http, kernel, hold=True):
                pid = await kernel_pid(http, kernel)
                r = await http.get(f"{API}/{kernel}")
                assert r.json()["kernel"]["holders"] == 1
                code = f"{gate.wait}\nprint('finished')"
                r = await http.post(f"{API}/{kernel}/executions", json={"code": code})
                number = r.json()["execution"]["number"]
        # The control kernel, released after it, stops once the grace has passed on the
        # gateway's clock; the running cell keeps the other one alive past its grace.
        await next_event(watcher, "kernel", kernel_id=control, phase="stopped")
        r = await http.get(f"{API}/{kernel}/executions/{number}")
        assert r.json()["execution"]["state"] == "running"
        r = await http.get(f"{API}/{kernel}")
        assert r.json()["kernel"]["alive"] is True
        gate.open()
        event = await next_event(watcher, "kernel", kernel_id=kernel, phase="stopped")
        assert event["kernel"]["state"] in ("dead", "gone")
        r = await http.get(f"{API}/{kernel}/executions/{number}", params={"head": 5})
        execution = r.json()["execution"]
        assert execution["state"] == "completed"
        assert [x["text"] for x in execution["output"]["head"]] == ["finished"]
        assert wait_gone({pid}, 30) == set()


async def test_persistent_kernel_ignores_holders(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.extra_args = ["--conversation-grace", "0.2"]
    fresh_gateway.start()
    async with client(fresh_gateway) as http, events(http) as watcher:
        r = await http.post(API, json={"name": "keeper"})
        keeper = r.json()["kernel"]["id"]
        async with events(http, keeper, hold=True):
            pass  # the persistent kernel's last holder goes first
        # An unheld conversation kernel stops once the grace has passed: this one, created
        # after the persistent one was released, stops on the gateway's own clock by which the
        # persistent one has been alone longer than that.
        r = await http.post(API, json={"lifetime": "conversation"})
        control = r.json()["kernel"]["id"]
        await next_event(watcher, "kernel", kernel_id=control, phase="stopped")
        r = await http.get(f"{API}/keeper")
        assert r.json()["kernel"]["alive"] is True
        r = await http.post(f"{API}/keeper/executions", json={"code": "1", "wait": 30})
        assert r.json()["execution"]["state"] == "completed"


async def test_create_or_get_by_name(http: httpx.AsyncClient) -> None:
    r = await http.post(API, json={"name": "named-one"})
    assert r.status_code == 201
    first = r.json()["kernel"]["id"]
    try:
        r = await http.post(API, json={"name": "named-one"})
        assert r.status_code == 200
        assert r.json()["kernel"]["id"] == first
        assert r.json()["created"] is False
        r = await http.get(f"{API}/{first[:8]}")
        assert r.json()["kernel"]["name"] == "named-one"
        r = await http.get(f"{API}/zzzzzzzz")
        assert r.status_code == 404
    finally:
        r = await http.delete(f"{API}/named-one")
        assert r.status_code == 200
    r = await http.get(f"{API}/named-one")
    assert r.json()["kernel"]["state"] == "gone"


FRAGILE_LAUNCHER = """
import pathlib, sys
marker = pathlib.Path(sys.argv[1])
if marker.exists():
    sys.exit(7)  # every restart fails
marker.touch()
sys.argv = [sys.argv[0], *sys.argv[2:]]
from ipykernel.kernelapp import launch_new_instance
launch_new_instance()
"""


def fragile_kernel_spec(root: Path) -> Path:
    """Write a kernel spec whose kernel starts once and then never again; return JUPYTER_PATH."""
    spec = root / "kernels" / "fragile"
    spec.mkdir(parents=True)
    launcher = root / "launcher.py"
    launcher.write_text(FRAGILE_LAUNCHER)
    argv = [sys.executable, str(launcher), str(root / "started"), "-f", "{connection_file}"]
    kernel_json = {"argv": argv, "display_name": "fragile", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel_json))
    return root


async def test_a_kernel_stopped_while_it_restarts_leaves_no_process(
    fresh_gateway: GatewayProcess,
) -> None:
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "stopped-mid-restart"})
        kernel = r.json()["kernel"]["id"]
        async with events(http, kernel) as stream:
            code = "import os\nprint('going', flush=True)\nos._exit(1)"
            await http.post(f"{API}/{kernel}/executions", json={"code": code})
            await next_event(stream, "kernel", phase="restarting")
            r = await http.delete(f"{API}/{kernel}")
            assert r.status_code == 200, r.text
        r = await http.get(f"{API}/{kernel}")
        assert r.json()["kernel"]["state"] == "gone"
    # Also the process the restart was starting: stop() fails on any kernel left running.
    fresh_gateway.stop()


async def test_kernel_that_cannot_restart_is_reported_dead(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    fresh_gateway.env = {"JUPYTER_PATH": str(fragile_kernel_spec(tmp_path / "jupyter"))}
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"kernel_spec": "fragile", "name": "fragile"})
        assert r.status_code == 201, r.text
        kernel = r.json()["kernel"]["id"]
        async with events(http, kernel) as stream:
            # The pause lets ZMQ carry the line out before the process vanishes.
            code = "import os, time\nprint('last words', flush=True)\ntime.sleep(0.2)\nos._exit(1)"
            r = await http.post(f"{API}/{kernel}/executions", json={"code": code})
            number = r.json()["execution"]["number"]
            await next_event(stream, "kernel", phase="stopped")
        r = await http.get(f"{API}/{kernel}/executions/{number}", params={"head": 5})
        execution = r.json()["execution"]
        assert execution["state"] == "died"
        assert execution["died"] == {
            "reason": "the kernel process exited with code 1",
            "cause": "exit",
            "restarted": False,
        }
        assert "could not be restarted" in execution["note"]
        assert [x["text"] for x in execution["output"]["head"]] == ["last words"]
        r = await http.get(f"{API}/{kernel}")
        assert r.json()["kernel"]["state"] == "gone"
        r = await http.post(f"{API}/{kernel}/executions", json={"code": "1"})
        assert r.status_code == 503
        r = await http.post(API, json={"kernel_spec": "fragile"})
        assert r.status_code == 503
        assert r.json()["message"].startswith(
            "the kernel did not start: the kernel process exited with code 7"
        )


HOLDER = """
import sys, httpx
url, token, kernel = sys.argv[1:]
params = {"kernel": kernel, "hold": "true"}
headers = {"Authorization": "token " + token}
with httpx.stream("GET", url + "/api/loomgate/events", params=params, headers=headers,
                  timeout=None) as r:
    for line in r.iter_lines():
        print(line, flush=True)
"""


async def test_crashed_holder_releases_conversation_kernel(
    fresh_gateway: GatewayProcess,
) -> None:
    fresh_gateway.extra_args = ["--conversation-grace", "2"]
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"lifetime": "conversation"})
        assert r.status_code == 201, r.text
        kernel = r.json()["kernel"]["id"]
        # The test holds the kernel while the holder process starts (slower than the grace).
        async with events(http, kernel, hold=True):
            holder = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                HOLDER,
                fresh_gateway.url,
                fresh_gateway.token,
                kernel,
                stdout=asyncio.subprocess.PIPE,
            )
            assert holder.stdout is not None
            first = await asyncio.wait_for(holder.stdout.readline(), 60)
            assert first.startswith(b"event: hello")
        try:
            # Only the holder process holds it now: killing it must start the grace period.
            async with events(http) as watcher:
                holder.kill()
                await next_event(watcher, "kernel", kernel_id=kernel, phase="stopped")
        finally:
            if holder.returncode is None:
                holder.kill()
            await holder.wait()
        r = await http.get(f"{API}/{kernel}")
        assert r.json()["kernel"]["state"] == "gone"


async def test_stop_kills_running_cell_and_keeps_records(http: httpx.AsyncClient) -> None:
    r = await http.post(API, json={})
    kernel = r.json()["kernel"]["id"]
    code = "import time\nprint('working', flush=True)\ntime.sleep(120)"
    r = await http.post(
        f"{API}/{kernel}/executions", json={"code": code, "until_silent": 0.3, "wait": 30}
    )
    number = r.json()["execution"]["number"]
    r = await http.delete(f"{API}/{kernel}")
    assert r.status_code == 200
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"head": 5})
    execution = r.json()["execution"]
    assert execution["state"] == "killed"
    assert execution["note"] == "the kernel was stopped"
    assert [x["text"] for x in execution["output"]["head"]] == ["working"]
    r = await http.delete(f"{API}/{kernel}")
    assert r.status_code == 503


async def test_records_expire_after_retention(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "old"})
        old = r.json()["kernel"]["id"]
        await http.post(f"{API}/old/executions", json={"code": "1", "wait": 30})
        await http.delete(f"{API}/old")
        r = await http.post(API, json={"name": "recent"})
        recent = r.json()["kernel"]["id"]
        await http.delete(f"{API}/recent")
    fresh_gateway.stop()
    kernel_json = fresh_gateway.state_dir / "kernels" / old / "kernel.json"
    meta = json.loads(kernel_json.read_text())
    meta["ended"] -= 8 * 86400  # ended eight days ago: past the default retention of seven
    kernel_json.write_text(json.dumps(meta))
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        assert (await http.get(f"{API}/{old}")).status_code == 404
        assert (await http.get(f"{API}/{recent}")).json()["kernel"]["state"] == "gone"
    assert not kernel_json.parent.exists()


def crashing_kernel_spec(root: Path, name: str = "crashing") -> Path:
    """Write a kernel spec whose process notes its launch in `launches` beside it, complains on
    stderr in colour and exits; return JUPYTER_PATH."""
    spec = root / "kernels" / name
    spec.mkdir(parents=True)
    launches = root / "launches"
    code = (
        f"import sys; open({str(launches)!r}, 'a').write('launched\\n'); "
        "print('\\x1b[31mImportError\\x1b[0m: no module named wibble', file=sys.stderr); "
        "sys.exit(3)"
    )
    argv = [sys.executable, "-c", code, "{connection_file}"]
    kernel_json = {"argv": argv, "display_name": "crashing", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel_json))
    return root


CRASHED = (
    "the kernel did not start: the kernel process exited with code 3; its last output: "
    "ImportError: no module named wibble"
)


async def test_a_kernel_that_exits_while_starting_says_why(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    fresh_gateway.env = {"JUPYTER_PATH": str(crashing_kernel_spec(tmp_path / "jupyter"))}
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post("/api/kernels", json={"name": "crashing"})  # a stock Jupyter client
        assert (r.status_code, r.json()["message"]) == (503, CRASHED)
        r = await http.post(API, json={"kernel_spec": "crashing"})
        assert (r.status_code, r.json()["message"]) == (503, CRASHED)
        r = await http.get("/api/kernels")
        assert r.json() == []  # nothing left behind
        listed = await http.get(API, params={"all": "true"})
        assert listed.json()["kernels"] == []  # not even a stopped entry
        # Nothing announces that a restarter did not start: wait out its first look (its poll
        # runs every 3 s) and count the launches, one per request.
        await asyncio.sleep(4)
        launches = tmp_path / "jupyter" / "launches"
        assert launches.read_text().splitlines() == ["launched"] * 2
    async with GatewayClient(fresh_gateway.url, fresh_gateway.token) as translator_side:
        with pytest.raises(GatewayError) as refused:
            await translator_side.create_kernel(kernel_spec="crashing")
        assert (refused.value.code, str(refused.value)) == ("unavailable", CRASHED)


async def test_the_cli_says_why_its_kernel_did_not_start(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    jupyter_path = crashing_kernel_spec(tmp_path / "jupyter", name="python3")
    fresh_gateway.env = {"JUPYTER_PATH": str(jupyter_path)}
    fresh_gateway.start()
    env = {
        **os.environ,
        "LOOMGATE_URL": fresh_gateway.url,
        "LOOMGATE_TOKEN": fresh_gateway.token,
    }
    cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "loomgate.translator.cli",
        "run",
        "1",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(cli.communicate(), 120)
    assert cli.returncode == 2
    assert err.decode().split("\n")[1] == f"loomgate: {CRASHED}"  # one line, no escapes


async def test_a_cell_a_reply_said_completed_stays_completed_after_a_sigkill(
    fresh_gateway: GatewayProcess,
) -> None:
    # SIGKILL the moment the reply arrives: its record.json may still say `running`, and the
    # next gateway must read the end the reply told from the journal, not call it lost.
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "counted"})
        assert r.status_code == 201, r.text
        await http.post(f"{API}/counted/executions", json={"code": "n = 0", "wait": 30})
    told: list[dict[str, object]] = []
    for _ in range(10):
        fresh_gateway.kill_soon()  # the process scan before the kill, done now
        async with client(fresh_gateway) as http:
            body = {"code": "n += 1\nprint(n)", "wait": 5, "head": 10}
            r = await http.post(f"{API}/counted/executions", json=body)
            fresh_gateway.kill_now()
        assert r.status_code == 201, r.text
        told.append(r.json()["execution"])
        assert told[-1]["state"] == "completed", told[-1]
        fresh_gateway.start()
    async with client(fresh_gateway) as http:
        for execution in told:
            r = await http.get(f"{API}/counted/executions/{execution['number']}?head=10")
            kept = r.json()["execution"]
            assert (kept["state"], kept["gaps"]) == ("completed", []), kept
            assert kept["finished"] == execution["finished"]
            heads = [[line["text"] for line in e["output"]["head"]] for e in (kept, execution)]
            assert heads[0] == heads[1], heads


def hold_next_request(arrived: Path, gate: Gate) -> str:
    """Return a cell after which the kernel's next shell request, on arrival, touches
    `arrived` and waits for `gate` before its handler runs (before the cell is announced)."""
    return (
        "k = get_ipython().kernel\n"
        "def hold(k=k):\n"
        "    k.pre_handler_hook = type(k).pre_handler_hook.__get__(k)\n"
        f"    open({str(arrived)!r}, 'w').close()\n"
        f"    {gate.wait}\n"
        "k.pre_handler_hook = hold\n"
        "n = 0"
    )


async def test_a_cell_sent_just_before_a_sigkill_has_a_record(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    # The kernel has the cell, the gateway dies before it is announced, and the kernel runs it
    # with no gateway listening: the next gateway gives its number a record (lost, its code
    # and sender from the journal), so numbering has no hole.
    arrived, gate = tmp_path / "arrived", Gate(tmp_path)
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "held"})
        assert r.status_code == 201, r.text
        body = {"code": hold_next_request(arrived, gate), "wait": 30}
        armed = (await http.post(f"{API}/held/executions", json=body)).json()["execution"]
        assert armed["state"] == "completed", armed
        fresh_gateway.kill_soon()
        body = {"code": "n += 1", "wait": 30}
        sent = asyncio.create_task(http.post(f"{API}/held/executions", json=body))
        while not await asyncio.to_thread(arrived.exists):
            assert not sent.done(), sent.result().text
            await asyncio.sleep(0.02)  # the kernel's file is the only sign it has the cell
        fresh_gateway.kill_now()
        with pytest.raises(httpx.TransportError):
            await sent
    gate.open()  # the kernel runs the cell, unseen
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        number = armed["number"] + 1
        r = await http.get(f"{API}/held/executions/{number}")
        assert r.status_code == 200, r.text
        record = r.json()["execution"]
        assert (record["state"], record["code"], record["source"]) == ("lost", "n += 1", "loomgate")
        assert "no gateway listened" in record["note"], record
        after = (
            await http.post(f"{API}/held/executions", json={"code": "n", "wait": 30, "head": 1})
        ).json()["execution"]
        assert after["number"] == number + 1
        assert [line["text"] for line in after["output"]["head"]] == ["1"]


async def test_a_gateway_killed_while_a_kernel_starts_leaves_no_process(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    # Its process launched, its resident.json not written yet (the kernel is ipykernel only
    # after a second): the next gateway ends it from its launch marker.
    fresh_gateway.env = {"JUPYTER_PATH": str(slow_kernel_spec(tmp_path / "jupyter"))}
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        creating = asyncio.create_task(http.post(API, json={"name": "starting"}))
        while not (launched := fresh_gateway.kernel_pids()):
            assert not creating.done(), creating.result().text
            await asyncio.sleep(0.02)  # no event tells of a process being launched
        fresh_gateway.kill_soon()
        fresh_gateway.kill_now()
        with pytest.raises(httpx.TransportError):
            await creating
    assert all(alive(pid) for pid in launched)
    fresh_gateway.start()
    assert wait_gone(launched, 30) == set(), "a kernel launched by a killed gateway ran on"
    async with client(fresh_gateway) as http:
        r = await http.get(f"{API}/starting")
        # It never served: unknown if the kill came before its records, else gone.
        assert r.status_code == 404 or r.json()["kernel"]["state"] == "gone", r.text


async def beat_after(state_dir: Path, moment: float, timeout: float = 15) -> float:
    """Return the time of the gateway's first note that it listens (its beat) after `moment`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        with contextlib.suppress(OSError, ValueError, KeyError):
            text = await asyncio.to_thread((state_dir / LAST_SEEN_FILE).read_text)
            written = json.loads(text)
            if written["time"] > moment:
                return float(written["time"])
        await asyncio.sleep(0.05)  # the beat is a file rewritten on the gateway's timer
    raise AssertionError(f"no beat in {state_dir / LAST_SEEN_FILE} after {moment}")


async def file_appears(path: Path, timeout: float = 30) -> None:
    """Return once `path` exists (a kernel's cell made it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await asyncio.to_thread(path.exists):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} did not appear within {timeout} s")


async def test_a_gap_begins_when_the_gateway_was_last_seen_not_at_the_last_output(
    fresh_gateway: GatewayProcess, gate: Gate
) -> None:
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "seen"})
        assert r.status_code == 201, r.text
        code = f"print('one', flush=True)\n{gate.wait}\nprint('two')"
        body = {"code": code, "wait": 30, "until_silent": 0.3}
        r = await http.post(f"{API}/seen/executions", json=body)
        printed = r.json()["execution"]["last_output"]
        beat = await beat_after(fresh_gateway.state_dir, printed + 1)
    fresh_gateway.kill()
    back = time.time()
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.get(f"{API}/seen/executions/1")
        [gap] = r.json()["execution"]["gaps"]
        assert gap["after_line"] == 1
        assert beat <= gap["since"] < back <= gap["until"], (printed, beat, back, gap)
        gate.open()
        r = await http.get(f"{API}/seen/executions/1", params={"wait": 30, "head": 5})
        execution = r.json()["execution"]
        assert execution["state"] == "completed"
        assert [x["text"] for x in execution["output"]["head"]] == ["one", "two"]


async def test_a_cell_that_ended_unseen_ran_until_the_gateway_was_last_seen(
    fresh_gateway: GatewayProcess, gate: Gate, tmp_path: Path
) -> None:
    # It printed nothing: before, its `finished` was its `started`, a 0 s run.
    done = tmp_path / "done"
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "quiet"})
        assert r.status_code == 201, r.text
        code = f"{gate.wait}\nopen({str(done)!r}, 'w').close()"
        r = await http.post(f"{API}/quiet/executions", json={"code": code, "wait": 0.5})
        started = r.json()["execution"]["started"]
        assert r.json()["execution"]["state"] == "running"
        beat = await beat_after(fresh_gateway.state_dir, started + 1)
    fresh_gateway.kill()
    gate.open()
    await file_appears(done)  # the cell's end, with no gateway to tell of it
    back = time.time()
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.get(f"{API}/quiet/executions/1", params={"wait": 30})
        execution = r.json()["execution"]
        assert execution["state"] == "lost", execution
        assert beat <= execution["finished"] < back, (started, beat, back, execution)
        assert execution["elapsed"] >= 1
        [gap] = execution["gaps"]
        assert gap["since"] == execution["finished"] and gap["until"] >= back


async def test_cells_another_client_ran_while_no_gateway_listened_have_records(
    fresh_gateway: GatewayProcess,
) -> None:
    # A person's Jupyter client (the kernel's connection file) runs cells while the gateway is
    # down: the next gateway gives each number a record from the kernel's own history.
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.post(API, json={"name": "shared"})
        assert r.status_code == 201, r.text
        kernel = r.json()["kernel"]["id"]
        first = await http.post(f"{API}/shared/executions", json={"code": "n = 40", "wait": 30})
        assert first.json()["execution"]["number"] == 1
    fresh_gateway.kill()
    connection = fresh_gateway.state_dir / "runtime" / f"kernel-{kernel}.json"
    other = AsyncKernelClient(connection_file=str(connection))
    other.load_connection_file()
    other.start_channels()
    try:
        for code in ("n += 1", "n += 1\nprint(n)"):
            reply = await other.execute_interactive(code, timeout=30)
            assert reply["content"]["status"] == "ok", reply
    finally:
        other.stop_channels()
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        records = [
            (await http.get(f"{API}/shared/executions/{number}")).json()["execution"]
            for number in (2, 3)
        ]
        assert [(e["state"], e["code"], e["source"]) for e in records] == [
            ("lost", "n += 1", "other"),
            ("lost", "n += 1\nprint(n)", "other"),
        ]
        assert all("no gateway listened" in e["note"] for e in records), records
        after = (
            await http.post(f"{API}/shared/executions", json={"code": "n", "wait": 30, "head": 1})
        ).json()["execution"]
        assert after["number"] == 4
        assert [line["text"] for line in after["output"]["head"]] == ["42"]
