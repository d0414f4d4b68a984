"""Waiting for a kernel's holder count, on the gateway's own event stream (no polling)."""

from __future__ import annotations

import asyncio

from loomgate.translator.client.gateway import GatewayClient

HOLDERS_TIMEOUT = 30.0


async def wait_for_holders(
    client: GatewayClient, kernel_id: str, count: int, timeout: float = HOLDERS_TIMEOUT
) -> None:
    """Return once the kernel has `count` holders, as its event stream reports them.

    The stream's `hello` carries the count when it opens, and every change comes as a `holders`
    event, so nothing between the check and the wait can be missed.
    """

    async def watch() -> None:
        async with client.event_stream(kernel_id, hold=False) as events:
            async for event in events:
                if event["event"] == "hello" and event["kernel"] is not None:
                    current = event["kernel"]["holders"]
                elif event["event"] == "holders":
                    current = event["holders"]
                else:
                    continue
                if current == count:
                    return
        raise AssertionError(f"the event stream ended before {count} holders")

    try:
        await asyncio.wait_for(watch(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"kernel {kernel_id} never had {count} holders") from None
