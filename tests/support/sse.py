"""A small server-sent-events reader for the gateway's /api/loomgate/events stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

EVENT_TIMEOUT = 60.0


@contextlib.asynccontextmanager
async def events(
    http: httpx.AsyncClient, kernel: str | None = None, *, hold: bool = False
) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
    """Open the event stream (after its `hello`), yielding an iterator of decoded events."""
    params: dict[str, str] = {}
    if kernel:
        params["kernel"] = kernel
    if hold:
        params["hold"] = "true"
    async with http.stream("GET", "/api/loomgate/events", params=params, timeout=None) as r:
        assert r.status_code == 200, await r.aread()
        iterator = decode(r.aiter_lines())
        hello = await anext(iterator)
        assert hello["event"] == "hello"
        yield iterator


async def decode(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """Return the events of an SSE line stream."""
    data: list[str] = []
    async for line in lines:
        if line.startswith("data: "):
            data.append(line[6:])
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


async def next_event(
    stream: AsyncIterator[dict[str, Any]], kind: str, **match: Any
) -> dict[str, Any]:
    """Return the next event of `kind` whose fields include `match` (fails after a timeout)."""

    async def find() -> dict[str, Any]:
        async for event in stream:
            if event["event"] == kind and all(event.get(k) == v for k, v in match.items()):
                return event
        raise AssertionError(f"event stream ended before a {kind!r} event")

    return await asyncio.wait_for(find(), EVENT_TIMEOUT)
