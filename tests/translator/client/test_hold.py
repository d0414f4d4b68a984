"""Kernel holds against a real gateway: counted while open, reconnected after a drop, released."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.hold import Hold
from tests.support.gateways import GatewayProcess
from tests.support.holds import wait_for_holders
from tests.support.proxies import DropProxy


async def test_hold_counts_while_open(client: GatewayClient, kid: str) -> None:
    seen: list[dict[str, Any]] = []
    completed = asyncio.Event()

    def on_event(event: dict[str, Any]) -> None:
        seen.append(event)
        if event["event"] == "execution" and event["execution"]["state"] == "completed":
            completed.set()

    async with Hold(client, kid, on_event=on_event):
        assert (await client.get_kernel(kid))["holders"] == 1
        await client.submit(kid, "print('hi')", wait=30)
        await asyncio.wait_for(completed.wait(), 10)
    assert seen[0]["event"] == "hello"
    await wait_for_holders(client, kid, 0)


async def test_hold_reconnects_after_a_drop(
    gateway: GatewayProcess, client: GatewayClient, kid: str
) -> None:
    proxy = DropProxy(int(gateway.url.rsplit(":", 1)[1]))
    hellos: list[dict[str, Any]] = []
    reconnected = asyncio.Event()

    async def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "hello":
            hellos.append(event)
            if len(hellos) >= 2:
                reconnected.set()

    try:
        async with GatewayClient(await proxy.start(), gateway.token) as proxied:
            hold = Hold(proxied, kid, on_event=on_event)
            async with hold:
                await wait_for_holders(client, kid, 1)
                proxy.drop()
                await asyncio.wait_for(reconnected.wait(), 10)  # the hold reconnected
                await wait_for_holders(client, kid, 1)
            await wait_for_holders(client, kid, 0)
    finally:
        await proxy.close()


async def test_hold_on_unknown_kernel_fails(client: GatewayClient) -> None:
    with pytest.raises(GatewayError) as missing:
        await Hold(client, "no-such-kernel").open()
    assert missing.value.code == "not_found"


async def test_client_close_releases_holds(gateway: GatewayProcess, client: GatewayClient) -> None:
    kernel = (await client.create_kernel(lifetime="conversation"))["kernel"]
    try:
        other = GatewayClient(gateway.url, gateway.token)
        await Hold(other, kernel["id"]).open()
        await wait_for_holders(client, kernel["id"], 1)
        await other.aclose()
        await wait_for_holders(client, kernel["id"], 0)
    finally:
        await client.stop_kernel(kernel["id"])
