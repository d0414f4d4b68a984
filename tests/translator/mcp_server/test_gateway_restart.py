"""A running `loomgate-mcp` carries on when its local gateway dies: the next call starts the
gateway again, which takes back the conversation's kernel, variables intact."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from loomgate.shared import wire
from loomgate.shared.paths import read_gateway_file
from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.local_gateway import open_local_client
from loomgate.translator.client.target import GatewayTarget
from loomgate.translator.mcp_server.settings import Settings
from tests.support.gateways import free_port, stop_local_gateway, wait_gone, wait_refused
from tests.support.holds import wait_for_holders
from tests.support.mcp_clients import text
from tests.support.translators import TRANSLATOR

CLI = [TRANSLATOR[0], "-m", "loomgate.translator.cli"]


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state dir of the test's own; its gateway and kernels are stopped afterwards."""
    directory = tmp_path / "state"
    monkeypatch.setenv("LOOMGATE_STATE_DIR", str(directory))
    try:
        yield directory
    finally:
        stop_local_gateway(directory)


async def test_a_new_translator_starts_the_local_gateway_before_its_first_call(
    state: Path,
) -> None:
    # A gateway that was killed here left its gateway.json: the next starts at its address.
    killed = await open_local_client(
        GatewayTarget(f"http://127.0.0.1:{free_port()}", None, True, None, True), autostart=True
    )
    await killed.aclose()
    died = read_gateway_file(state)
    assert died is not None
    os.kill(died["pid"], signal.SIGKILL)
    assert not wait_gone({died["pid"]}, 30)
    translator = StdioServerParameters(
        command=TRANSLATOR[0], args=[*TRANSLATOR[1:], *Settings().argv()], env=dict(os.environ)
    )
    async with Client(translator) as mcp:
        # No tool called: the gateway comes up as the translator starts.
        async with GatewayClient(died["url"], died["token"]) as watcher:
            info = await until_answering(watcher)
        assert info["pid"] != died["pid"]
        first = await mcp.call_tool("run_cell", {"code": "1+1"})
        assert text(first).endswith("Out[1]: 2")
        await mcp.call_tool("stop_kernel", {"kernel": first.structured_content["kernel"]})  # type: ignore[index]


async def until_answering(client: GatewayClient) -> wire.Info:
    """Return the gateway's info once it answers (it is being started)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while True:
        try:
            return await client.info()
        except GatewayError:
            if loop.time() > deadline:
                raise
        await asyncio.sleep(0.05)


async def test_the_next_call_after_a_gateway_sigkill_succeeds(state: Path) -> None:
    # The local gateway, started as autostart does, on a port of the test's own.
    started = await open_local_client(
        GatewayTarget(f"http://127.0.0.1:{free_port()}", None, True, None, True), autostart=True
    )
    await started.aclose()
    translator = StdioServerParameters(
        command=TRANSLATOR[0],
        args=[*TRANSLATOR[1:], *Settings().argv()],  # the local gateway, autostart on
        env=dict(os.environ),
    )
    async with Client(translator) as mcp:
        first = await mcp.call_tool("run_cell", {"code": "x = 5\nx"})
        assert text(first).endswith("Out[1]: 5")
        kernel = first.structured_content["kernel"]  # type: ignore[index]
        died = read_gateway_file(state)
        assert died is not None
        os.kill(died["pid"], signal.SIGKILL)
        assert not wait_gone({died["pid"]}, 30)
        wait_refused(died["url"])  # its last thread has closed the listening socket

        after = await mcp.call_tool("run_cell", {"code": "x + 1"})
        assert not after.is_error, text(after)
        assert text(after).endswith("Out[2]: 6")
        assert after.structured_content["kernel"] == kernel  # type: ignore[index]
        revived = read_gateway_file(state)
        assert revived is not None and revived["pid"] != died["pid"]
        assert revived["url"] == died["url"]  # started again where its clients look for it
        assert revived["token"] == died["token"]  # so they need nothing new
        async with GatewayClient(revived["url"], revived["token"]) as watcher:
            await wait_for_holders(watcher, kernel, 1)  # the conversation's hold is back
        await mcp.call_tool("stop_kernel", {"kernel": kernel})


async def test_a_rotated_token_is_read_again_and_the_conversation_goes_on(state: Path) -> None:
    started = await open_local_client(
        GatewayTarget(f"http://127.0.0.1:{free_port()}", None, True, None, True), autostart=True
    )
    await started.aclose()
    translator = StdioServerParameters(
        command=TRANSLATOR[0], args=[*TRANSLATOR[1:], *Settings().argv()], env=dict(os.environ)
    )
    async with Client(translator) as mcp:
        # Enough cells for the rpc websocket to be open: it too must come back.
        for code in ("x = 5", "x", "x"):
            first = await mcp.call_tool("run_cell", {"code": code})
        assert text(first).endswith("Out[3]: 5")
        kernel = first.structured_content["kernel"]  # type: ignore[index]
        before = read_gateway_file(state)
        assert before is not None
        rotated = await asyncio.create_subprocess_exec(
            *CLI, "gateway", "rotate-token", env=dict(os.environ)
        )
        assert await asyncio.wait_for(rotated.wait(), 120) == 0
        after = read_gateway_file(state)
        assert after is not None and after["token"] != before["token"]
        assert after["pid"] != before["pid"] and after["url"] == before["url"]

        again = await mcp.call_tool("run_cell", {"code": "x + 1"})
        assert not again.is_error, text(again)
        assert text(again).endswith("Out[4]: 6")  # the same kernel, its variables kept
        assert again.structured_content["kernel"] == kernel  # type: ignore[index]
        listing = await mcp.call_tool("list_kernels", {})
        assert not listing.is_error, text(listing)
        async with GatewayClient(after["url"], after["token"]) as watcher:
            await wait_for_holders(watcher, kernel, 1)  # the hold came back, with the new token
            assert (await watcher.get_kernel(kernel))["alive"]
        await mcp.call_tool("stop_kernel", {"kernel": kernel})


async def test_a_refused_token_names_where_it_came_from(
    state: Path, config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = await open_local_client(
        GatewayTarget(f"http://127.0.0.1:{free_port()}", None, True, None, True), autostart=True
    )
    url = started.url
    await started.aclose()
    (config_dir / "gateways.toml").write_text(
        f'[gateways.lab]\nurl = "{url}"\ntoken_env = "LAB_TOKEN"\n\n'
        f'[gateways.kept]\nurl = "{url}"\ntoken = "an-old-token"\n'
    )
    (config_dir / "gateways.toml").chmod(0o600)
    cases = [
        (
            ["--gateway", url],
            {"LOOMGATE_TOKEN": "wrong"},
            "in LOOMGATE_TOKEN; set it to this gateway's token",
        ),
        (
            ["--gateway", "lab"],
            {"LAB_TOKEN": "wrong"},
            f"in LAB_TOKEN (token_env of gateway 'lab' in {config_dir / 'gateways.toml'}); "
            "set LAB_TOKEN to this gateway's token",
        ),
        (
            ["--gateway", "kept"],
            {},
            f"of gateway 'kept' in {config_dir / 'gateways.toml'}; put this gateway's token there",
        ),
    ]
    for args, env, said in cases:
        run = await asyncio.create_subprocess_exec(
            *CLI,
            *args,
            "kernels",
            env={**os.environ, **env},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(run.communicate(), 120)
        name = (
            f"the gateway {args[1]!r} at {url}" if "://" not in args[1] else f"the gateway at {url}"
        )
        assert (run.returncode, err.decode()) == (2, f"loomgate: {name} refused the token {said}\n")
