"""Idle conversation kernels nobody holds are capped (`--idle-conversations`): beyond the cap the
longest idle is stopped first, never a held one, one running a cell or a named one; each unheld
kernel's model says when its grace ends, and `loomgate kernels` says it too (a real gateway,
real kernels, the real CLI)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from tests.support.cells import KERNELS, run, submit
from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess, client
from tests.support.sse import EVENT_TIMEOUT, events

LOOMGATE = [sys.executable, "-m", "loomgate.translator.cli"]
GRACE = 600.0  # the default: nothing here waits for it


class Seen:
    """The events of an all-kernels stream, kept, so that a wait for one never loses another."""

    def __init__(self, stream: AsyncIterator[dict[str, Any]]) -> None:
        self.stream = stream
        self.events: list[dict[str, Any]] = []

    async def first(
        self, wanted: Callable[[dict[str, Any]], bool], since: int = 0
    ) -> dict[str, Any]:
        """Return the first event, seen (the `since`th on) or still to come, that is `wanted`."""
        for event in self.events[since:]:
            if wanted(event):
                return event

        async def find() -> dict[str, Any]:
            async for event in self.stream:
                self.events.append(event)
                if wanted(event):
                    return event
            raise AssertionError("the event stream ended")

        return await asyncio.wait_for(find(), EVENT_TIMEOUT)

    async def holders(self, kernel: str, count: int, since: int = 0) -> None:
        """Return once `kernel` has had `count` holders (in an event from the `since`th on)."""
        await self.first(
            lambda e: (
                e["event"] == "holders" and e["kernel_id"] == kernel and e["holders"] == count
            ),
            since,
        )

    async def stopped(self, kernel: str) -> None:
        """Return once `kernel` has been stopped."""
        await self.first(
            lambda e: (
                e["event"] == "kernel" and e["kernel_id"] == kernel and e["phase"] == "stopped"
            )
        )

    def stops(self) -> set[str]:
        """Return the kernels seen stopped so far."""
        return {
            e["kernel_id"]
            for e in self.events
            if e["event"] == "kernel" and e["phase"] == "stopped"
        }


async def conversation(http: httpx.AsyncClient, name: str | None = None) -> str:
    """Return the id of a new conversation kernel (`name`: one a person named)."""
    r = await http.post(KERNELS, json={"lifetime": "conversation", "name": name})
    assert r.status_code == 201, r.text
    kernel: str = r.json()["kernel"]["id"]
    return kernel


@contextlib.asynccontextmanager
async def held(http: httpx.AsyncClient, seen: Seen, kernel: str) -> AsyncIterator[None]:
    """Hold `kernel` as a translator does while inside; return once its holder has let go."""
    async with events(http, kernel, hold=True):
        await seen.holders(kernel, 1)  # read past every earlier event of it
        yield
        letting_go = len(seen.events)
    await seen.holders(kernel, 0, letting_go)


async def kernels_by_id(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """Return the gateway's kernels (gone ones too) by id."""
    listed = await http.get(KERNELS, params={"all": "true"})
    return {kernel["id"]: kernel for kernel in listed.json()["kernels"]}


async def test_beyond_the_cap_the_longest_idle_unheld_kernel_is_stopped_first(
    fresh_gateway: GatewayProcess, gate: Gate
) -> None:
    fresh_gateway.extra_args = ["--idle-conversations", "2"]
    fresh_gateway.start()
    async with (
        client(fresh_gateway) as http,
        events(http) as stream,
        contextlib.AsyncExitStack() as holding,
    ):
        seen = Seen(stream)
        began = time.time()
        named = await conversation(http, "person-named")
        async with held(http, seen, named):
            pass
        busy = await conversation(http)
        async with held(http, seen, busy):
            assert (await submit(http, busy, gate.wait, wait=0))["execution"]["state"] == "running"
        first = await conversation(http)
        async with held(http, seen, first):
            pass
        second = await conversation(http)
        async with held(http, seen, second):
            pass
        kept = await conversation(http)
        await holding.enter_async_context(events(http, kept, hold=True))
        await seen.holders(kept, 1)
        assert seen.stops() == set()  # two idle unheld: the cap, not beyond it

        third = await conversation(http)
        async with held(http, seen, third):
            pass
        await seen.stopped(first)  # three idle unheld: the longest idle goes

        assert (await run(http, second, "1"))["state"] == "completed"  # now third idles longest
        gate.open()  # the busy one ends its cell: three idle unheld again
        await seen.stopped(third)

        listed = await kernels_by_id(http)
        alive = {kernel for kernel, model in listed.items() if model["alive"]}
        assert alive == {named, busy, second, kept}
        assert seen.stops() == {first, third}
        assert listed[kept]["stops_at"] is None  # held
        for kernel in (named, busy, second):
            stops_at = listed[kernel]["stops_at"]
            assert stops_at is not None and began < stops_at - GRACE < time.time()

        env = {
            **os.environ,
            "LOOMGATE_URL": fresh_gateway.url,
            "LOOMGATE_TOKEN": fresh_gateway.token,
        }
        process = await asyncio.create_subprocess_exec(
            *LOOMGATE, "kernels", env=env, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0
        text = out.decode()
        clock = time.strftime("%H:%M:%S", time.localtime(listed[second]["stops_at"]))
        assert re.search(
            rf"^{second[:8]}: nobody holds it; stopped at {clock} \(in \d+ min \d+ s\) unless a "
            r"conversation takes it back$",
            text,
            re.MULTILINE,
        ), text
        assert re.search(r"^person-named: nobody holds it; stopped at ", text, re.MULTILINE)
        assert f"{kept[:8]}: nobody holds it" not in text


async def test_past_its_grace_a_kernel_waits_for_its_cell_even_one_awaiting_input(
    fresh_gateway: GatewayProcess,
) -> None:
    fresh_gateway.extra_args = ["--conversation-grace", "0.5"]
    fresh_gateway.start()
    async with client(fresh_gateway) as http, events(http) as stream:
        seen = Seen(stream)
        kernel = await conversation(http)  # never held: its grace runs from its start
        asking = await submit(http, kernel, "input('name? ')", wait=30)
        assert asking["returned"] == "input"
        number = asking["execution"]["number"]
        stops_at = (await http.get(f"{KERNELS}/{kernel}")).json()["kernel"]["stops_at"]
        # No event marks the grace's end: the gateway answers right through it, and after.
        while time.time() < stops_at + 1.0:
            info = await http.get("/api/loomgate/info", timeout=5)
            assert info.status_code == 200
            await asyncio.sleep(0.1)
        model = (await http.get(f"{KERNELS}/{kernel}")).json()["kernel"]
        assert model["alive"] and model["state"] == "awaiting_input"
        assert model["stops_at"] == stops_at  # past: it goes once its cell ends
        answered = await http.post(
            f"{KERNELS}/{kernel}/executions/{number}/input", json={"value": "ada"}
        )
        assert answered.status_code == 200, answered.text
        await seen.stopped(kernel)
