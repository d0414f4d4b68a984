"""The gateway's event stream: server-sent event lines decoded into events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import cast

from loomgate.shared.events import Event


async def decode_events(lines: AsyncIterator[str]) -> AsyncIterator[Event]:
    """Return the events of a server-sent event line stream (their `data:` JSON objects)."""
    data: list[str] = []
    async for line in lines:
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            try:
                event = json.loads("\n".join(data))
            except ValueError:
                event = None
            data = []
            if isinstance(event, dict):
                yield cast(Event, event)  # the gateway's own shape, trusted as answer_as trusts it
