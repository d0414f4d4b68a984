"""Chaos: conversations on named kernels while the gateway and translators are SIGKILLed on a
seeded schedule, the gateway restarted each time on the same state dir, its kernels under the
default profile (each a bubblewrap sandbox: bwrap, the sandbox's init, the kernel). One more
conversation branches as it goes: it checkpoints, rolls back and forks as well as running cells.
Afterwards nothing a client was told is taken back, no number lacks a record, and no kernel (or
copy of one) is left unowned."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import signal
from collections.abc import Awaitable, Callable
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


@dataclass
class Branching:
    """The conversation that checkpoints, rolls back and forks: the kernel it is on, the
    range each of its kernels' counters may be in given what its client was told, the
    checkpoints and forks it was told were made, and what contradicted that."""

    kernel: str
    counters: dict[str, tuple[int, int]] = field(default_factory=dict)
    checkpoints: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    forks: dict[str, str] = field(default_factory=dict)  # a fork's name → its origin's
    cells: int = 0
    rollbacks: int = 0  # told done
    made: int = 0  # checkpoints and forks asked for (each gets a new name)
    pid: int | None = None
    restarts: int = 0
    contradictions: list[str] = field(default_factory=list)

    def told_cell(self, printed: int) -> None:
        """Note a completed increment that printed `printed`."""
        low, high = self.counters[self.kernel]
        if not low + 1 <= printed <= high + 1:
            self.contradictions.append(
                f"{self.kernel} printed {printed}, not in {low + 1}..{high + 1}"
            )
        self.counters[self.kernel] = (printed, printed)
        self.cells += 1

    def unseen_cell(self) -> None:
        """Note an increment whose outcome was not heard (it may have run)."""
        low, high = self.counters[self.kernel]
        self.counters[self.kernel] = (low, high + 1)

    def rolled_back(self, to: str, told: bool) -> None:
        """Note a rollback to `to`: told, the checkpoint's range; unheard, either range, or a
        fresh process (a gateway killed mid-rollback: its next starts the kernel again)."""
        high = self.counters[self.kernel][1]
        kept_low, kept_high = self.checkpoints[(self.kernel, to)]
        self.counters[self.kernel] = (kept_low, kept_high) if told else (0, max(high, kept_high))
        self.rollbacks += told


MAX_FORKS = 3  # each a kernel (its process, its checkpoints) on two cores
BRANCH_CHECKPOINTS = 6  # per kernel, under its cap of 8 (unheard ones count too)


class Chaos:
    """The conversations and the killer, sharing one gateway."""

    def __init__(self, gateway: GatewayProcess, rng: random.Random) -> None:
        self.gateway, self.rng = gateway, rng
        self.spawning = asyncio.Lock()  # a new translator's pid is told apart by its arrival
        self.done = asyncio.Event()
        self.kills = {"gateway": 0, "translator": 0}
        self.branching: list[Branching] = []

    async def converse(self, conversation: Conversation) -> None:
        """Run cells on the conversation's kernel until the killer is done."""
        await self.go_on(conversation, lambda mcp: self.run_cell(mcp, conversation))

    async def go_on(
        self, conversation: Conversation | Branching, step: Callable[[Client], Awaitable[bool]]
    ) -> None:
        """Take the conversation's steps until the killer is done, starting a new translator
        whenever its own was killed (a step returns whether its translator is still there)."""
        while not self.done.is_set():
            async with contextlib.AsyncExitStack() as stack:
                async with self.spawning:
                    before = translator_pids()
                    mcp = await stack.enter_async_context(Client(stdio(self.gateway)))
                    [conversation.pid] = translator_pids() - before
                if not await self.attach(mcp, conversation):
                    continue
                while not self.done.is_set():
                    if not await step(mcp):
                        break
            conversation.restarts += 1

    async def attach(self, mcp: Client, conversation: Conversation | Branching) -> bool:
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

    async def branch(self, branching: Branching) -> None:
        """Run the branching conversation's steps until the killer is done."""
        await self.go_on(branching, lambda mcp: self.branch_step(mcp, branching))

    async def branch_step(self, mcp: Client, branching: Branching) -> bool:
        """Take one seeded step: a cell, a checkpoint, a rollback or a fork; return whether the
        translator is still there."""
        kernel = branching.kernel
        taken = [name for (k, name) in branching.checkpoints if k == kernel]
        roll = self.rng.random()
        if roll < 0.5 or (roll >= 0.8 and not taken):
            return await self.branch_cell(mcp, branching)
        branching.made += 1
        if roll < 0.8:
            if sum(1 for k, _ in branching.checkpoints if k == kernel) >= BRANCH_CHECKPOINTS:
                return await self.branch_cell(mcp, branching)
            name = f"cp{branching.made}"
            result = await self.call(mcp, "checkpoint", {"name": name})
            if result is not None and not result.is_error:
                branching.checkpoints[(kernel, name)] = branching.counters[kernel]
            return result is not None
        to = self.rng.choice(taken)
        if roll < 0.92 or len(branching.forks) >= MAX_FORKS:
            result = await self.call(mcp, "rollback", {"to": to})
            branching.rolled_back(to, told=result is not None and not result.is_error)
            return result is not None
        fork = f"chaos-fork-{branching.made}"
        result = await self.call(mcp, "connect", {"kernel": fork, "fork": f"{kernel}@{to}"})
        if result is not None and not result.is_error:
            branching.forks[fork] = kernel
            branching.counters[fork] = branching.checkpoints[(kernel, to)]
            branching.kernel = fork  # the conversation goes on in the fork
        return result is not None

    async def branch_cell(self, mcp: Client, branching: Branching) -> bool:
        """Run one increment on the branching conversation's kernel."""
        result = await self.call(mcp, "run_cell", {"code": CELL})
        if result is None:
            branching.unseen_cell()
            return False
        content: dict[str, Any] = result.structured_content or {}
        if result.is_error or content.get("state") != "completed":
            branching.unseen_cell()
            await asyncio.sleep(0.05)  # the gateway is down, or the kernel taken back
            return True
        [printed] = [line for line in result.content[0].text.split("\n") if line.isdigit()]
        branching.told_cell(int(printed))
        return True

    async def call(self, mcp: Client, tool: str, arguments: dict[str, Any]) -> Any:
        """Call a tool; return its result (None: the translator was killed mid-call)."""
        try:
            return await asyncio.wait_for(mcp.call_tool(tool, arguments), CALL_TIMEOUT)
        except Exception:
            return None

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
                    victims: list[Conversation | Branching] = [*conversations, *self.branching]
                    victim = self.rng.choice(victims)
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
            branching = Branching(kernel="chaos-branch", counters={"chaos-branch": (0, 0)})
            r = await http.post(API, json={"name": branching.kernel})
            assert r.status_code == 201, r.text
        chaos = Chaos(gateway, rng)
        chaos.branching.append(branching)
        await asyncio.wait_for(
            asyncio.gather(
                chaos.kill(conversations),
                *map(chaos.converse, conversations),
                chaos.branch(branching),
            ),
            timeout=300,
        )
        async with client(gateway) as http:
            for conversation in conversations:
                await check_kernel(http, conversation, processes[conversation.kernel])
            await check_branching(http, branching)
        cells = sum(len(c.seen) for c in conversations)
        assert cells > KILLS, f"seed {SEED}: too few cells ran to mean anything ({cells})"
        assert branching.checkpoints and branching.cells, f"seed {SEED}: the branching did little"
    finally:
        gateway.stop()  # fails if any kernel process of the state dir is left
    figure(
        scenario=f"chaos: {CONVERSATIONS} conversations under workspace, {KILLS} random SIGKILLs "
        f"(seed {SEED})",
        checked="every kernel kept its id and process; each counter is the increments a client saw "
        "complete, plus at most the unseen ones; every execution a client saw complete is still "
        "completed with its output; numbers 1..N all have records, none running; the branching "
        "conversation's counters agree with every checkpoint, rollback and fork it was told of, "
        "each of which is still there; after the final stop no kernel process (bwrap, sandbox "
        "init, kernel, frozen copy, starter) is left",
        kills_of_the_gateway=chaos.kills["gateway"],
        kills_of_translators=chaos.kills["translator"],
        cells_seen_completed=cells,
        branching_cells_checkpoints_rollbacks_forks=(
            f"{branching.cells} / {len(branching.checkpoints)} / {branching.rollbacks} / "
            f"{len(branching.forks)}"
        ),
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


async def check_branching(http: httpx.AsyncClient, branching: Branching) -> None:
    """Check the branching conversation's kernels against what its client was told: each one
    alive, its counter in its range, its numbers all recorded, its checkpoints and forks there."""
    where = f"seed {SEED}, branching"
    assert not branching.contradictions, (where, branching.contradictions)
    for kernel, (low, high) in branching.counters.items():
        body = {"code": "print(globals().get('counter', 0))", "wait": 30, "head": 1}
        r = await http.post(f"{API}/{kernel}/executions", json=body)
        assert r.status_code == 201, (where, kernel, r.text)
        final = r.json()["execution"]
        counter = int(final["output"]["head"][0]["text"])
        assert low <= counter <= high, (where, kernel, low, counter, high)
        for number in range(1, final["number"] + 1):
            r = await http.get(f"{API}/{kernel}/executions/{number}")
            assert r.status_code == 200, (where, kernel, number, r.text)
            assert r.json()["execution"]["state"] != "running", (where, r.json())
        listed = (await http.get(f"{API}/{kernel}/checkpoints")).json()["checkpoints"]
        names = {checkpoint["name"] for checkpoint in listed}
        told = {name for (k, name) in branching.checkpoints if k == kernel}
        assert told <= names, (where, kernel, told - names)
    for fork, origin in branching.forks.items():
        model = (await http.get(f"{API}/{fork}")).json()["kernel"]
        assert model["forked_from"]["name"] == origin, (where, fork, model["forked_from"])
