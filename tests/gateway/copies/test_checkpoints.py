"""Checkpoints and rollback through the gateway's API (SPEC §10), on an unconfined kernel of the
shared gateway and under the shipped default profile: a checkpoint keeps the kernel's state, a
rollback brings it back (same kernel, numbering kept, the checkpoint stays), also after the
kernel died or was reset; refusals in one sentence; a stopped kernel's checkpoints end."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from loomgate.gateway.process_identity import ProcessIdentity
from tests.support.cells import output_texts, run, submit
from tests.support.gateways import GatewayProcess, client
from tests.support.sse import events, next_event

API = "/api/loomgate/kernels"
ENDED_TIMEOUT = 10  # for a stopped kernel's copies to end (SIGKILL, sent by its stop)


@pytest.fixture(params=["none", "default"])
async def copied(
    request: pytest.FixtureRequest, http: httpx.AsyncClient
) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    """A client and a new kernel, unconfined (the shared gateway) or under the default profile
    (a gateway of the test's own); stopped afterwards."""
    if request.param == "none":
        kernel = await created(http)
        try:
            yield http, kernel
        finally:
            await http.delete(f"{API}/{kernel}")
        return
    gateway: GatewayProcess = request.getfixturevalue("confined_gateway").start()
    async with client(gateway) as own:
        yield own, await created(own)


@pytest.fixture(params=["fresh_gateway", "confined_gateway"])
def own_gateway(request: pytest.FixtureRequest) -> GatewayProcess:
    """A started gateway of the test's own (a test may kill and start it again), its kernels
    unconfined or under the default profile; stopped with them afterwards."""
    gateway: GatewayProcess = request.getfixturevalue(request.param).start()
    return gateway


async def created(http: httpx.AsyncClient) -> str:
    """Return the id of a new kernel."""
    r = await http.post(API, json={})
    assert r.status_code == 201, r.text
    return str(r.json()["kernel"]["id"])


async def value(http: httpx.AsyncClient, kernel: str, expression: str) -> str:
    """Return the text `print(expression)` prints in the kernel."""
    execution = await run(http, kernel, f"print({expression})")
    assert execution["state"] == "completed", execution
    return output_texts(execution)[0]


async def checkpoint(http: httpx.AsyncClient, kernel: str, **body: str) -> dict[str, object]:
    """Take a checkpoint; return the reply."""
    r = await http.post(f"{API}/{kernel}/checkpoints", json=body)
    assert r.status_code == 201, r.text
    reply: dict[str, object] = r.json()
    return reply


async def rollback(http: httpx.AsyncClient, kernel: str, to: str) -> dict[str, object]:
    """Roll the kernel back; return the reply."""
    r = await http.post(f"{API}/{kernel}/rollback", json={"to": to})
    assert r.status_code == 200, r.text
    reply: dict[str, object] = r.json()
    return reply


async def test_a_rollback_brings_the_checkpoints_state_back(
    copied: tuple[httpx.AsyncClient, str],
) -> None:
    http, kernel = copied
    await run(http, kernel, "x = 41\nbig = bytearray(20_000_000)\nimport os; pid = os.getpid()")
    reply = await checkpoint(http, kernel)
    assert reply["checkpoint"]["name"] == "after-1"  # type: ignore[index]
    assert reply["checkpoint"]["after"] == 1  # type: ignore[index]
    assert reply["lacks"] == []
    await run(http, kernel, "x = 'ruined'\ndel big")
    for _ in range(2):  # the checkpoint stays: a second rollback works
        rolled = await rollback(http, kernel, "after-1")
        assert rolled["kernel"]["id"] == kernel  # type: ignore[index]
        assert rolled["kernel"]["state"] == "idle"  # type: ignore[index]
        assert [c["name"] for c in rolled["kernel"]["checkpoints"]] == ["after-1"]  # type: ignore[index]
        assert await value(http, kernel, "(x, len(big))") == "(41, 20000000)"
        assert await value(http, kernel, "pid != os.getpid()") == "True"  # another process
        await run(http, kernel, "x = 'ruined again'")
    execution = await run(http, kernel, "1 + 1")
    assert execution["number"] == 9  # numbering goes on through rollbacks
    listed = (await http.get(f"{API}/{kernel}/checkpoints")).json()["checkpoints"]
    assert [(c["name"], c["after"]) for c in listed] == [("after-1", 1)]
    notebook = (await http.get(f"{API}/{kernel}/notebook")).text
    assert "rolled back to after-1 (the state after In [1])" in notebook
    # Its malloc asks for huge pages: a fork copies fewer page-table entries.
    assert "glibc.malloc.hugetlb=1" in await value(http, kernel, "os.environ['GLIBC_TUNABLES']")


async def test_a_rollback_brings_the_state_back_after_a_death_and_a_reset(
    copied: tuple[httpx.AsyncClient, str],
) -> None:
    http, kernel = copied
    await run(http, kernel, "kept = [1, 2, 3]")
    await checkpoint(http, kernel, name="safe")
    async with events(http, kernel) as stream:
        died = await run(http, kernel, "import os; os._exit(3)", wait=30)
        assert died["state"] == "died", died
        await next_event(stream, "kernel", phase="ready")
    assert await value(http, kernel, "'kept' in globals()") == "False"  # a fresh process
    await rollback(http, kernel, "safe")
    assert await value(http, kernel, "kept") == "[1, 2, 3]"
    r = await http.post(f"{API}/{kernel}/reset")
    assert r.status_code == 200, r.text
    assert await value(http, kernel, "'kept' in globals()") == "False"
    await rollback(http, kernel, "safe")
    assert await value(http, kernel, "kept") == "[1, 2, 3]"


async def test_an_interrupt_reaches_a_rolled_back_kernel(
    copied: tuple[httpx.AsyncClient, str],
) -> None:
    http, kernel = copied
    await checkpoint(http, kernel, name="start")
    await rollback(http, kernel, "start")
    number = (await submit(http, kernel, "import time; time.sleep(60)", wait=0))["execution"][
        "number"
    ]
    r = await http.post(f"{API}/{kernel}/interrupt", json={"execution": number})
    assert r.status_code == 200, r.text
    r = await http.get(f"{API}/{kernel}/executions/{number}", params={"wait": 30})
    assert r.json()["execution"]["state"] == "interrupted"
    assert await value(http, kernel, "'after'") == "after"  # and the checkpoint did not wake


async def test_checkpoints_are_refused_in_one_sentence(
    http: httpx.AsyncClient, kernel: str
) -> None:
    bad = await http.post(f"{API}/{kernel}/checkpoints", json={"name": "no spaces"})
    assert (bad.status_code, bad.json()["error"]) == (400, "bad_request")
    assert "is not one" in bad.json()["message"]
    await checkpoint(http, kernel, name="one")
    again = await http.post(f"{API}/{kernel}/checkpoints", json={"name": "one"})
    assert (again.status_code, again.json()["message"]) == (
        409,
        f"kernel {kernel[:8]} already has a checkpoint one; drop it first or pick another name",
    )
    unknown = await http.post(f"{API}/{kernel}/rollback", json={"to": "two"})
    assert (unknown.status_code, unknown.json()["message"]) == (
        404,
        f"kernel {kernel[:8]} has no checkpoint 'two' (its checkpoints: one)",
    )
    missing = await http.post(f"{API}/{kernel}/rollback", json={})
    assert (missing.status_code, missing.json()["error"]) == (400, "bad_request")
    number = (await submit(http, kernel, "import time; time.sleep(60)", wait=0))["execution"][
        "number"
    ]
    busy = await http.post(f"{API}/{kernel}/checkpoints", json={"name": "two"})
    assert (busy.status_code, busy.json()["message"]) == (
        409,
        f"kernel {kernel[:8]} is running In [{number}]; a copy is made between cells: wait "
        "for it or interrupt it first",
    )
    rolled = await http.post(f"{API}/{kernel}/rollback", json={"to": "one"})
    assert rolled.status_code == 409, rolled.text
    await http.post(f"{API}/{kernel}/interrupt")
    dropped = await http.delete(f"{API}/{kernel}/checkpoints/one")
    assert (dropped.status_code, dropped.json()) == (200, {"checkpoints": []})
    gone = await http.delete(f"{API}/{kernel}/checkpoints/one")
    assert gone.status_code == 404


async def test_a_kernel_holding_a_cuda_context_is_refused_and_left_alone(
    http: httpx.AsyncClient, kernel: str
) -> None:
    fake_torch = (
        "import sys, types\n"
        "sys.modules['torch'] = types.SimpleNamespace(\n"
        "    cuda=types.SimpleNamespace(is_initialized=lambda: True))"
    )
    assert (await run(http, kernel, fake_torch))["state"] == "completed"
    refusal = (
        f"kernel {kernel[:8]} holds a CUDA context, which a process copy cannot carry; save the "
        "state to a file instead"
    )
    for refused in (
        await http.post(f"{API}/{kernel}/checkpoints", json={"name": "gpu"}),
        await http.post(API, json={"name": f"f-{kernel[:6]}", "fork": kernel}),
    ):
        assert (refused.status_code, refused.json()["message"]) == (409, refusal), refused.text
    assert stopped_copies(kernel) == []  # refused before anything was copied
    assert (await http.get(f"{API}/{kernel}/checkpoints")).json()["checkpoints"] == []


async def test_a_stopped_kernels_checkpoints_end(
    copied: tuple[httpx.AsyncClient, str],
) -> None:
    http, kernel = copied
    await run(http, kernel, "import threading, socket")
    sleeper = (
        "threading.Thread(target=__import__('time').sleep, args=(60,), name='sleeper').start()"
    )
    threads = await run(http, kernel, sleeper)
    assert threads["state"] == "completed"
    listening = "server = socket.create_server(('127.0.0.1', 0))\nprint(server.getsockname()[1])"
    port = output_texts(await run(http, kernel, listening))[0]
    reply = await checkpoint(http, kernel, name="with-thread")
    assert reply["lacks"] == [
        "threads ['sleeper'] run in the kernel; a copy has none of them",
        f"sockets ['tcp listening on 127.0.0.1:{port}'] are open in the kernel; a copy shares "
        "them (what one side reads there, the other does not)",
    ]
    await rollback(http, kernel, "with-thread")  # its process a copy too
    processes = copies(kernel)
    assert processes and all(p.is_alive() for p in processes)
    model = (await http.get(f"{API}/{kernel}")).json()["kernel"]
    own_dir = Path(model["sandbox"]["packages"]).parent  # its sandbox's, or its own dir
    r = await http.delete(f"{API}/{kernel}")
    assert r.status_code == 200, r.text
    await asyncio.wait_for(asyncio.gather(*(p.ended() for p in processes)), ENDED_TIMEOUT)
    assert not own_dir.exists()  # its copies' files go with them


def copies(kernel: str) -> list[ProcessIdentity]:
    """Return the frozen copies of `kernel` (stopped processes whose command names its
    connection file), once there is one: a copy stops itself a moment after its checkpoint's
    reply (a stranger's stop has no event: /proc is polled)."""
    deadline = time.monotonic() + ENDED_TIMEOUT
    while not (found := stopped_copies(kernel)) and time.monotonic() < deadline:
        time.sleep(0.01)
    return found


def processes_of(kernel: str) -> Iterator[tuple[int, list[bytes], str]]:
    """Yield the pid, arguments and state of each process whose command names `kernel`'s
    connection file (its own, its copies, its starters)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if any(kernel.encode() in word for word in words):
            yield int(entry.name), words, state


def stopped_copies(kernel: str) -> list[ProcessIdentity]:
    """Return the stopped processes whose command names `kernel`'s connection file."""
    found = []
    for pid, _words, state in processes_of(kernel):
        if state == "T":
            identity = ProcessIdentity.of(pid)
            if identity is not None:
                found.append(identity)
    return found


async def test_checkpoints_are_taken_back_after_a_gateway_sigkill(
    own_gateway: GatewayProcess,
) -> None:
    async with client(own_gateway) as http:
        kernel = await created(http)
        await run(http, kernel, "x = 1")
        await checkpoint(http, kernel, name="one")
        await rollback(http, kernel, "one")  # its process is a copy now
        await run(http, kernel, "x = 2")
        await checkpoint(http, kernel, name="two")
        processes = copies(kernel)
        own_gateway.kill()
    assert processes and all(p.is_alive() for p in processes)
    own_gateway.start()
    async with client(own_gateway) as http:
        listed = (await http.get(f"{API}/{kernel}/checkpoints")).json()["checkpoints"]
        assert [(c["name"], c["after"]) for c in listed] == [("one", 1), ("two", 2)]
        assert await value(http, kernel, "x") == "2"  # the same process, taken back
        await rollback(http, kernel, "one")
        assert await value(http, kernel, "x") == "1"
        r = await http.delete(f"{API}/{kernel}")
        assert r.status_code == 200, r.text
    await asyncio.wait_for(asyncio.gather(*(p.ended() for p in processes)), ENDED_TIMEOUT)


async def test_checkpoints_holding_half_the_memory_limit_refuse_another(
    confined_root: Path, confined_gateway: GatewayProcess
) -> None:
    config = confined_root / "config" / "loomgate" / "sandbox.toml"
    config.write_text(config.read_text() + '\n[profiles.workspace]\nmemory = "800MiB"\n')
    async with client(confined_gateway.start()) as http:
        kernel = await created(http)
        # 150 MiB the kernel rewrites after each checkpoint: each checkpoint keeps its own.
        fill = "data = bytearray(150 * 2**20)\nfor i in range(0, len(data), 4096): data[i] = {v}"
        await run(http, kernel, fill.format(v=1))
        for name, value in (("one", 2), ("two", 3), ("three", 4)):
            await checkpoint(http, kernel, name=name)
            assert (await run(http, kernel, fill.format(v=value)))["state"] == "completed"
        refused = await http.post(f"{API}/{kernel}/checkpoints", json={"name": "four"})
        assert refused.status_code == 409, refused.text
        assert re.fullmatch(
            rf"kernel {kernel[:8]}'s checkpoints hold [\d.]+ MiB, over half its memory limit of "
            r"800 MiB; drop one first \((one|two|three) holds the most, [\d.]+ MiB\)",
            refused.json()["message"],
        ), refused.json()["message"]


async def test_a_kernel_of_another_implementation_is_refused_in_one_sentence(
    http: httpx.AsyncClient,
) -> None:
    r = await http.post(API, json={"kernel_spec": "py"})  # ipymini
    assert r.status_code == 201, r.text
    kernel = r.json()["kernel"]["id"]
    try:
        for refused in (
            await http.post(f"{API}/{kernel}/checkpoints", json={}),
            await http.post(API, json={"name": f"f-{kernel[:6]}", "fork": kernel}),
        ):
            assert refused.status_code == 409, refused.text
            assert refused.json()["message"] == (
                f"kernel {kernel[:8]} runs ipymini, which loomgate cannot copy (only ipykernel "
                "started by this gateway); save what matters to a file instead"
            )
    finally:
        await http.delete(f"{API}/{kernel}")


async def test_a_kernel_that_ended_while_the_gateway_was_down_comes_back_with_its_checkpoints(
    own_gateway: GatewayProcess,
) -> None:
    async with client(own_gateway) as http:
        kernel = await created(http)
        await run(http, kernel, "x = 41")
        await checkpoint(http, kernel, name="kept")
        processes = copies(kernel)
        own_gateway.kill()
    os.kill(kernel_pid(kernel), signal.SIGKILL)  # the kernel ends while no gateway watches
    assert processes and all(p.is_alive() for p in processes)
    async with client(own_gateway.start()) as http:
        model = (await http.get(f"{API}/{kernel}")).json()["kernel"]
        assert model["state"] == "idle"  # started again, from its starter
        assert [c["name"] for c in model["checkpoints"]] == ["kept"]
        assert await value(http, kernel, "'x' in dir()") == "False"
        assert (await run(http, kernel, "1 + 1"))["number"] == 3  # numbering goes on
        await rollback(http, kernel, "kept")
        assert await value(http, kernel, "x") == "41"
        notebook = (await http.get(f"{API}/{kernel}/notebook")).text
        assert "the kernel process ended while the gateway was down" in notebook
        r = await http.delete(f"{API}/{kernel}")
        assert r.status_code == 200, r.text
    await asyncio.wait_for(asyncio.gather(*(p.ended() for p in processes)), ENDED_TIMEOUT)


def kernel_pid(kernel: str) -> int:
    """Return the host pid of `kernel`'s own process (inside its sandbox or not): the running
    Python whose command is the copy launcher's, naming the kernel's connection file."""
    for pid, words, state in processes_of(kernel):
        if state != "T" and len(words) > 1 and words[1].endswith(b"copy_launcher.py"):
            return pid
    raise AssertionError(f"kernel {kernel}'s process was not found")
