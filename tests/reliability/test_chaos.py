"""Chaos: conversations on named kernels while the gateway and translators are SIGKILLed on a
seeded schedule, the gateway restarted each time on the same state dir, its kernels under the
default profile (each a bubblewrap sandbox: bwrap, the sandbox's init, the kernel). Afterwards
nothing a client was told is taken back, no number lacks a record, and no kernel is left
unowned."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from tests.support.figures import Figure, scaled
from tests.support.gateways import GatewayProcess, alive, client
from tests.support.sandboxed_gateways import PROCESS_CELL, confined_gateway
from tests.support.translators import stdio, translator_pids

SEED = int(os.environ.get("LOOMGATE_CHAOS_SEED", "20261202"))
CONVERSATIONS = 4
KILLS = scaled(20)
CELL = "counter = globals().get('counter', 0) + 1\nprint(counter)"
API = "/api/loomgate/kernels"
CALL_TIMEOUT = 60.0


@dataclass
class Conversation:
    """One conversation's kernel, what its client was told, and its translator."""

    kernel: str
    seen: dict[int, int] = field(default_factory=dict)  # execution number → printed counter
    unseen: int = 0  # cells sent whose outcome the client never heard
    pid: int | None = None  # its translator's
    restarts: int = 0


class Chaos:
    """The conversations and the killer, sharing one gateway."""

    def __init__(self, gateway: GatewayProcess, rng: random.Random) -> None:
        self.gateway, self.rng = gateway, rng
        self.spawning = asyncio.Lock()  # a new translator's pid is told apart by its arrival
        self.done = asyncio.Event()
        self.kills = {"gateway": 0, "translator": 0}

    async def converse(self, conversation: Conversation) -> None:
        """Run cells on the conversation's kernel until the killer is done, starting a new
        translator whenever its own was killed."""
        while not self.done.is_set():
            async with contextlib.AsyncExitStack() as stack:
                async with self.spawning:
                    before = translator_pids()
                    mcp = await stack.enter_async_context(Client(stdio(self.gateway)))
                    [conversation.pid] = translator_pids() - before
                if not await self.attach(mcp, conversation):
                    continue
                while not self.done.is_set():
                    if not await self.run_cell(mcp, conversation):
                        break
            conversation.restarts += 1

    async def attach(self, mcp: Client, conversation: Conversation) -> bool:
        """Connect the conversation to its kernel; return whether that worked."""
        while not self.done.is_set():
            try:
                result = await asyncio.wait_for(
                    mcp.call_tool("connect", {"kernel": conversation.kernel}), CALL_TIMEOUT
                )
            except Exception:
                return False  # its translator was killed
            if not result.is_error:
                return True
            await asyncio.sleep(0.05)  # the gateway is down: nothing announces its return
        return False

    async def run_cell(self, mcp: Client, conversation: Conversation) -> bool:
        """Run one increment; return whether the translator is still there."""
        try:
            result = await asyncio.wait_for(mcp.call_tool("run_cell", {"code": CELL}), CALL_TIMEOUT)
        except Exception:
            conversation.unseen += 1  # its translator was killed mid-call
            return False
        content: dict[str, Any] = result.structured_content or {}
        if result.is_error or content.get("state") != "completed":
            conversation.unseen += 1
            await asyncio.sleep(0.05)  # the gateway is down, or the kernel taken back
            return True
        [printed] = [line for line in result.content[0].text.split("\n") if line.isdigit()]
        conversation.seen[int(content["execution"])] = int(printed)
        return True

    async def kill(self, conversations: list[Conversation]) -> None:
        """SIGKILL the gateway or a translator at seeded moments, KILLS times in all."""
        try:
            for _ in range(KILLS):
                await asyncio.sleep(self.rng.uniform(0.1, 0.6))  # the schedule, not a wait
                if self.rng.random() < 0.4:
                    self.gateway.kill_soon()
                    self.gateway.kill_now()
                    self.kills["gateway"] += 1
                    await asyncio.to_thread(self.gateway.start)
                else:
                    victim = self.rng.choice(conversations)
                    if victim.pid is not None and alive(victim.pid):
                        os.kill(victim.pid, signal.SIGKILL)
                        self.kills["translator"] += 1
        finally:
            self.done.set()


async def test_chaos_loses_nothing_a_client_was_told(confined_root: Path, figure: Figure) -> None:
    gateway = confined_gateway(confined_root, token=secrets.token_urlsafe(24))
    rng = random.Random(SEED)
    try:
        gateway.start()
        conversations = [Conversation(kernel=f"chaos-{i}") for i in range(CONVERSATIONS)]
        async with client(gateway) as http:
            for conversation in conversations:
                r = await http.post(API, json={"name": conversation.kernel})
                assert r.status_code == 201, r.text
                assert r.json()["kernel"]["sandbox"]["profile"] == "workspace", r.text
            processes = {c.kernel: await process_of(http, c.kernel) for c in conversations}
        chaos = Chaos(gateway, rng)
        await asyncio.wait_for(
            asyncio.gather(chaos.kill(conversations), *map(chaos.converse, conversations)),
            timeout=300,
        )
        async with client(gateway) as http:
            for conversation in conversations:
                await check_kernel(http, conversation, processes[conversation.kernel])
        cells = sum(len(c.seen) for c in conversations)
        assert cells > KILLS, f"seed {SEED}: too few cells ran to mean anything ({cells})"
    finally:
        gateway.stop()  # fails if any kernel process of the state dir is left
    figure(
        scenario=f"chaos: {CONVERSATIONS} conversations under workspace, {KILLS} random SIGKILLs "
        f"(seed {SEED})",
        checked="every kernel kept its id and process; each counter is the increments a client saw "
        "complete, plus at most the unseen ones; every execution a client saw complete is still "
        "completed with its output; numbers 1..N all have records, none running; after the "
        "final stop no kernel process (bwrap, sandbox init, kernel) is left",
        kills_of_the_gateway=chaos.kills["gateway"],
        kills_of_translators=chaos.kills["translator"],
        cells_seen_completed=cells,
        lost=0,
    )


async def process_of(http: httpx.AsyncClient, kernel: str) -> str:
    """Return what tells `kernel`'s process from any other, as the kernel itself says."""
    body = {"code": PROCESS_CELL, "wait": 30, "head": 1}
    r = await http.post(f"{API}/{kernel}/executions", json=body)
    assert r.status_code == 201, r.text
    return str(r.json()["execution"]["output"]["head"][0]["text"])


async def check_kernel(http: httpx.AsyncClient, conversation: Conversation, process: str) -> None:
    """Check what the run left of one conversation's kernel against what its client saw."""
    where = f"seed {SEED}, kernel {conversation.kernel}"
    assert await process_of(http, conversation.kernel) == process, f"{where}: a new process"
    body = {"code": "print(counter)", "wait": 30, "head": 1}
    r = await http.post(f"{API}/{conversation.kernel}/executions", json=body)
    final = r.json()["execution"]
    counter = int(final["output"]["head"][0]["text"])
    seen = len(conversation.seen)
    assert seen <= counter <= seen + conversation.unseen, (where, seen, conversation.unseen)
    for number, printed in conversation.seen.items():
        r = await http.get(f"{API}/{conversation.kernel}/executions/{number}?head=5")
        kept = r.json()["execution"]
        assert kept["state"] == "completed", (where, kept)
        assert [line["text"] for line in kept["output"]["head"]] == [str(printed)], (where, kept)
    for number in range(1, final["number"] + 1):
        r = await http.get(f"{API}/{conversation.kernel}/executions/{number}")
        assert r.status_code == 200, (where, number, r.text)
        assert r.json()["execution"]["state"] != "running", (where, r.json())
