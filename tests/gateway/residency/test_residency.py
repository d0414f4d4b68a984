"""Kernels outlive their gateway: a killed or stopped gateway's kernels are taken back by the
next one on the same state dir, with their ids, names, variables, numbering and records; the
scenarios of processes run under the default profile (bubblewrap: bwrap, the sandbox's init and
the kernel), those of pids and state files unconfined."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency.kernel_command import LAUNCHER
from loomgate.gateway.residency.resident import RESIDENT_FILE
from loomgate.translator.client.local_gateway import gateway_command
from tests.support.cells import submit
from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess, client, free_port, resident_kernels
from tests.support.kernel_ws import KernelWebsocket
from tests.support.sse import events, next_event

API = "/api/loomgate/kernels"
IPYKERNEL = [os.fsencode(LAUNCHER)]  # how a kernel's own command line goes on (ipykernel)


def ticker(flag: Path) -> str:
    """Return a cell that prints a line every 50 ms until `flag` exists, then ends."""
    return (
        "import os, time\ni = 0\n"
        f"while not os.path.exists({str(flag)!r}):\n"
        "    print('tick', i, flush=True)\n    i += 1\n    time.sleep(0.05)\n'done'"
    )


async def output(http: httpx.AsyncClient, kernel: str, code: str) -> str:
    """Return the text of the single line `code` outputs."""
    reply = await submit(http, kernel, code, head=5)
    lines = reply["execution"]["output"]["head"]
    assert len(lines) == 1, lines
    return str(lines[0]["text"])


async def created(http: httpx.AsyncClient, **body: Any) -> str:
    """Return the id of a new kernel."""
    r = await http.post(API, json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["kernel"]["id"])


def sandboxed(pids: set[int]) -> set[ProcessIdentity]:
    """Return the processes of one confined kernel: bwrap, the sandbox's init and the kernel
    (and its network's bridge, under a profile with network)."""
    processes = {p for p in map(ProcessIdentity.of, pids) if p is not None}
    commands = [command(p.pid) for p in processes]
    assert [c[0].endswith(b"bwrap") for c in commands].count(True) == 2, commands
    assert [c[1:2] == IPYKERNEL for c in commands].count(True) == 1, commands
    return processes


def kernel_process(pids: set[int]) -> int:
    """Return which of a confined kernel's processes is the kernel itself (ipykernel)."""
    [pid] = [p for p in pids if command(p)[1:2] == IPYKERNEL]
    return pid


def command(pid: int) -> list[bytes]:
    """Return the command line of process `pid`."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


@pytest.fixture
async def five(confined_gateway: GatewayProcess) -> AsyncIterator[dict[str, str]]:
    """Five kernels in five situations on a gateway of the test's own, under the default
    profile: name → kernel id."""
    confined_gateway.start()
    async with client(confined_gateway) as http:
        kernels = {
            "named": await created(http, name="named"),
            "held": await created(http, name="held", lifetime="conversation"),
            "ticking": await created(http, name="ticking"),
            "asking": await created(http, name="asking"),
            "idle": await created(http, name="idle"),
        }
        yield kernels


async def test_five_kernels_survive_a_gateway_sigkill(
    confined_gateway: GatewayProcess, five: dict[str, str], confined_root: Path
) -> None:
    fresh_gateway = confined_gateway
    flag = confined_root / "stop-ticking"  # where the confined kernel sees it (not in /tmp)
    async with client(fresh_gateway) as http:
        await submit(http, "named", "answer = 41")
        await submit(http, "held", "kept = 'yes'")
        ticking = await submit(http, "ticking", ticker(flag), wait=0.5, until_silent=0.3)
        assert ticking["execution"]["state"] == "running"
        asking = await submit(http, "asking", "reply = input('name? ')\nprint('hello', reply)")
        assert asking["execution"]["state"] == "awaiting_input"
        before = {k["id"]: k for k in (await http.get(API)).json()["kernels"]}
        async with events(http, five["held"], hold=True):  # a live holder, killed with it
            fresh_gateway.kill()
    sandboxes = resident_kernels(fresh_gateway.state_dir)
    assert len(sandboxes) == 10, sandboxes  # bwrap and the sandbox's init, each kernel
    assert all(process.is_alive() for process in sandboxes)

    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        after = {k["id"]: k for k in (await http.get(API)).json()["kernels"]}
        assert set(after) == set(five.values())
        for kernel_id, model in after.items():
            assert model["name"] == before[kernel_id]["name"]
            assert model["alive"]
            assert model["sandbox"]["profile"] == "workspace"
        assert all(process.is_alive() for process in sandboxes)  # taken back, not restarted
        assert after[five["held"]]["lifetime"] == "conversation"
        assert after[five["held"]]["holders"] == 0  # its holder died with the old gateway

        # Variables intact, numbering continues (In [2], Out[2], _2 agree).
        reply = await submit(http, "named", "answer + 1", head=5)
        assert reply["execution"]["number"] == 2
        assert reply["execution"]["output"]["head"][0]["text"] == "42"
        reply = await submit(http, "named", "_2, Out[2]", head=5)
        assert reply["execution"]["number"] == 3
        assert reply["execution"]["output"]["head"][0]["text"] == "(42, 42)"
        assert await output(http, "held", "kept") == "'yes'"

        # The cell that spanned the gap goes on, ends as it ends, and says what may be missing.
        number = ticking["execution"]["number"]
        running = (await http.get(f"{API}/ticking/executions/{number}")).json()["execution"]
        assert running["state"] == "running"
        flag.touch()
        ended = (
            await http.get(f"{API}/ticking/executions/{number}", params={"wait": 60, "tail": 2})
        ).json()["execution"]
        assert ended["state"] == "completed"
        last_tick, result = [x["text"] for x in ended["output"]["tail"]]
        assert last_tick.startswith("tick ") and result == "'done'"
        [gap] = ended["gaps"]
        assert gap["since"] <= gap["until"] and gap["after_line"] >= 1
        kept = (
            await http.get(
                f"{API}/ticking/executions/{number}/streams/stdout", params={"lines": "1:3"}
            )
        ).json()["lines"]
        assert [x["text"] for x in kept] == ["tick 0", "tick 1", "tick 2"]

        # The input() prompt is still answerable.
        number = asking["execution"]["number"]
        waiting = (await http.get(f"{API}/asking/executions/{number}")).json()["execution"]
        assert waiting["state"] == "awaiting_input"
        assert waiting["input"] == {"prompt": "name? ", "password": False}
        r = await http.post(f"{API}/asking/executions/{number}/input", json={"value": "Ada"})
        assert r.status_code == 200, r.text
        done = (
            await http.get(f"{API}/asking/executions/{number}", params={"wait": 30, "head": 3})
        ).json()["execution"]
        assert done["state"] == "completed"
        assert [x["text"] for x in done["output"]["head"]] == ["hello Ada"]

        # Any Jupyter client sees the kernels taken back and runs cells on them.
        listed = {k["id"] for k in (await http.get("/api/kernels")).json()}
        assert listed == set(five.values())
        async with KernelWebsocket(
            fresh_gateway.url, fresh_gateway.token, five["idle"], binary=True
        ) as ws:
            reply, iopub = await ws.run("6 * 7")
        assert reply["content"]["status"] == "ok"
        assert reply["content"]["execution_count"] == 1
        assert any(m["header"]["msg_type"] == "execute_result" for m in iopub)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_signal_keeps_kernels_and_stop_ends_them(
    confined_gateway: GatewayProcess, signum: int
) -> None:
    fresh_gateway = confined_gateway
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        await created(http, name="kept")
        await submit(http, "kept", "value = 7")
    processes = sandboxed(fresh_gateway.kernel_pids())
    fresh_gateway.signal(signum)  # one signal stops it: no y/n prompt
    assert all(p.is_alive() for p in processes), "a signal must leave the kernel running"
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        assert await output(http, "kept", "value") == "7"
        r = await http.post("/api/loomgate/shutdown", json={"kernels": "keep"})
        assert r.status_code == 202
    fresh_gateway.proc.wait(30)  # type: ignore[union-attr]
    assert all(p.is_alive() for p in processes), "kernels=keep must leave the kernel running"
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        assert await output(http, "kept", "value") == "7"
    fresh_gateway.stop()  # asserts that every kernel it ever ran is gone
    assert not any(p.is_alive() for p in processes)


async def test_a_clean_shutdown_ends_running_cells_killed(
    confined_gateway: GatewayProcess, confined_root: Path
) -> None:
    fresh_gateway, gate = confined_gateway, Gate(confined_root)  # a gate the kernel sees
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        await created(http, name="busy")
        r = await http.post(f"{API}/busy/executions", json={"code": gate.wait})
        number = r.json()["execution"]["number"]
        assert r.json()["execution"]["state"] == "running"
        processes = sandboxed(fresh_gateway.kernel_pids())
        r = await http.post("/api/loomgate/shutdown", json={"kernels": "stop"})
        assert r.status_code == 202
    fresh_gateway.proc.wait(30)  # type: ignore[union-attr]
    assert not any(p.is_alive() for p in processes)
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        r = await http.get(f"{API}/busy/executions/{number}")
        execution = r.json()["execution"]
        assert (execution["state"], execution["note"]) == ("killed", "the kernel was stopped")
        r = await http.get(f"{API}/busy")
        assert r.json()["kernel"]["alive"] is False


async def test_a_reused_pid_is_never_signalled(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        kernel_id = await created(http, name="victim")
        await submit(http, "victim", "import time\ntime.sleep(600)", wait=0.2)
    [pid] = fresh_gateway.kernel_pids()
    fresh_gateway.kill()
    os.killpg(pid, signal.SIGKILL)  # the kernel dies while no gateway runs
    stranger = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(600)"
    )
    try:
        state = fresh_gateway.state_dir / "kernels" / kernel_id / RESIDENT_FILE
        data = json.loads(state.read_text())
        data["provisioner"]["identity"]["pid"] = stranger.pid  # the pid now names a stranger
        data["provisioner"]["pid"] = data["provisioner"]["pgid"] = stranger.pid
        state.write_text(json.dumps(data))
        fresh_gateway.start()
        async with client(fresh_gateway) as http:
            model = (await http.get(f"{API}/victim")).json()["kernel"]
            assert not model["alive"] and model["state"] == "gone"
            assert model["end_reason"] == "the kernel process ended while the gateway was down"
            record = (await http.get(f"{API}/victim/executions/1")).json()["execution"]
            assert record["state"] == "died"
            assert record["died"]["reason"] == "the kernel process ended while the gateway was down"
            assert record["died"]["cause"] == "unknown"
        fresh_gateway.stop()
        assert stranger.returncode is None, "the gateway signalled a process not its kernel"
    finally:
        stranger.kill()
        await stranger.wait()


async def test_a_kernel_that_does_not_answer_is_taken_back_once_it_does(
    confined_gateway: GatewayProcess,
) -> None:
    fresh_gateway = confined_gateway
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        kernel_id = await created(http, name="frozen")
        await submit(http, "frozen", "kept = 7")
    kept = fresh_gateway.state_dir / "kernels" / kernel_id / RESIDENT_FILE
    launched = json.loads(kept.read_text())["provisioner"]["pid"]  # bwrap's
    pid = kernel_process(fresh_gateway.kernel_pids())
    os.kill(pid, signal.SIGSTOP)  # alive and ours, but it cannot answer
    try:
        fresh_gateway.kill()
        fresh_gateway.start()
        async with client(fresh_gateway) as http:
            model = (await http.get(f"{API}/frozen")).json()["kernel"]
            assert (model["alive"], model["state"], model["ended"]) == (False, "gone", None)
            assert model["end_reason"] == (
                f"its process (pid {launched}) runs but did not answer when the gateway came "
                "back (no kernel_info reply within 10 s); it is tried again every 5 s"
            )
            assert stat.S_IMODE(kept.stat().st_mode) == 0o600  # kept, and private
            async with events(http) as stream:
                os.kill(pid, signal.SIGCONT)
                await next_event(stream, "kernel", kernel_id=kernel_id, phase="ready")
            assert await output(http, "frozen", "print(kept)") == "7"
            model = (await http.get(f"{API}/frozen")).json()["kernel"]
            assert (model["alive"], model["state"], model["end_reason"]) == (True, "idle", None)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (lambda text: text[: len(text) // 2], "cannot be read"),
        (lambda text: text.replace('"format": 1', '"format": 99'), "has format 99"),
    ],
    ids=["corrupt", "unknown-format"],
)
async def test_an_unusable_state_file_skips_that_kernel_only(
    fresh_gateway: GatewayProcess, spoil: Any, reason: str
) -> None:
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        spoilt = await created(http, name="spoilt")
        await created(http, name="fine")
        await submit(http, "fine", "x = 1")
    fresh_gateway.kill()
    state = fresh_gateway.state_dir / "kernels" / spoilt / RESIDENT_FILE
    pid = json.loads(state.read_text())["provisioner"]["pid"]
    state.write_text(spoil(state.read_text()))
    try:
        fresh_gateway.start()
        async with client(fresh_gateway) as http:
            assert await output(http, "fine", "x") == "1"
            assert not (await http.get(f"{API}/spoilt")).json()["kernel"]["alive"]
        log = (fresh_gateway.state_dir / "gateway.log").read_text()
        assert f"Not taking back kernel {spoilt}" in log and reason in log
        assert state.exists(), "nothing is deleted for a kernel that was not taken back"
    finally:
        os.killpg(pid, signal.SIGKILL)  # no gateway took it back: the test ends it


def test_two_gateways_cannot_share_a_state_dir(fresh_gateway: GatewayProcess) -> None:
    fresh_gateway.start()
    command = gateway_command(port=free_port(), state_dir=fresh_gateway.state_dir)
    second = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert second.returncode == 2
    assert second.stderr.splitlines() == [
        f"loomgate-gateway: another gateway (pid {fresh_gateway.proc.pid}) uses the state dir "  # type: ignore[union-attr]
        f"{fresh_gateway.state_dir}; stop it first (loomgate gateway stop), or choose another "
        "with --state-dir"
    ]


async def test_a_cell_that_ended_unseen_is_lost_not_invented(
    fresh_gateway: GatewayProcess, tmp_path: Path
) -> None:
    ended_unseen = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ended_unseen.set()
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    go = tmp_path / "go"
    code = (
        "import os, socket, time\n"
        f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n"
        "print('after the crash')\n"
        f"socket.create_connection(('127.0.0.1', {port})).close()"
    )
    fresh_gateway.start()
    try:
        async with client(fresh_gateway) as http:
            await created(http, name="unseen")
            started = await submit(http, "unseen", code, wait=0.2)
            number = started["execution"]["number"]
        fresh_gateway.kill()
        go.touch()
        await asyncio.wait_for(ended_unseen.wait(), 60)  # the cell ended; no gateway listened
    finally:
        server.close()
    fresh_gateway.start()
    async with client(fresh_gateway) as http:
        ended = (
            await http.get(f"{API}/unseen/executions/{number}", params={"wait": 30, "head": 5})
        ).json()["execution"]
        assert ended["state"] == "lost"
        assert ended["note"] == "it ended while the gateway was down; how it ended is unknown"
        assert ended["output"]["head"] == []  # what it printed unseen is not invented
        assert len(ended["gaps"]) == 1
        # Its time ends where the gateway last saw it, not when the next one took it back.
        assert ended["finished"] == ended["gaps"][0]["since"]
        assert ended["elapsed"] == ended["finished"] - ended["started"]
        reply = await submit(http, "unseen", "1 + 1", head=1)
        assert reply["execution"]["number"] == number + 1


async def test_conversation_kernel_taken_back_restarts_its_grace(tmp_path: Path) -> None:
    gateway = GatewayProcess(tmp_path / "state", extra_args=["--conversation-grace", "5"])
    gateway.start()
    try:
        async with client(gateway) as http:
            kernel_id = await created(http, lifetime="conversation")
            async with events(http, kernel_id, hold=True):
                gateway.kill()
        gateway.start()
        async with client(gateway) as http, events(http, kernel_id) as stream:
            # Taken back with no holder: its grace runs out and it stops, records kept.
            await next_event(stream, "kernel", phase="stopped")
            r = await http.get(f"{API}/{kernel_id}")
            assert r.json()["kernel"]["state"] == "gone"
    finally:
        gateway.stop()
