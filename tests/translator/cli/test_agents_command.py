"""`loomgate agents open|close KERNEL` and `loomgate run --open-to-agents` against a real
sandboxed gateway: the person opens a kernel looser than the default to agents, and closes it."""

from __future__ import annotations

import argparse

import pytest

from loomgate.translator.cli.kernel_commands import agents
from loomgate.translator.cli.run import run_command
from loomgate.translator.client.gateway import GatewayClient
from tests.support.cells import KERNELS
from tests.support.gateways import client
from tests.support.sandboxed_gateways import SandboxedGateway


@pytest.fixture
def in_project(sandboxed: SandboxedGateway, monkeypatch: pytest.MonkeyPatch) -> SandboxedGateway:
    """The sandboxed gateway, with the test working in its project (the CLI's kernels' cwd)."""
    monkeypatch.chdir(sandboxed.project)
    return sandboxed


async def test_agents_open_and_close_a_kernel(
    in_project: SandboxedGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    gateway = in_project.gateway
    async with GatewayClient(gateway.url, gateway.token) as cli, client(gateway) as http:
        r = await http.post(
            KERNELS, json={"name": "wide", "sandbox": "none", "cwd": str(in_project.project)}
        )
        assert r.status_code == 201 and r.json()["kernel"]["open_to_agents"] is False
        opened = await agents(cli, argparse.Namespace(action="open", kernel="wide"))
        after_open = (await http.get(f"{KERNELS}/wide")).json()["kernel"]["open_to_agents"]
        closed = await agents(cli, argparse.Namespace(action="close", kernel="wide"))
        after_close = (await http.get(f"{KERNELS}/wide")).json()["kernel"]["open_to_agents"]
    assert (opened, closed) == (0, 0)
    assert (after_open, after_close) == (True, False)
    assert capsys.readouterr().out.splitlines() == [
        "kernel wide is open to agents: a model may use it whatever its sandbox",
        "kernel wide is closed to agents",
    ]


async def test_run_opens_the_kernel_it_starts_to_agents(
    in_project: SandboxedGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(
        code="1 + 1",
        file=None,
        kernel="wide",
        sandbox="none",
        kernel_spec=None,
        open_to_agents=True,
        json=False,
    )
    gateway = in_project.gateway
    async with GatewayClient(gateway.url, gateway.token) as cli, client(gateway) as http:
        status = await run_command(cli, args)
        kernel = (await http.get(f"{KERNELS}/wide")).json()["kernel"]
    assert status == 0
    assert (kernel["sandbox"]["profile"], kernel["open_to_agents"]) == ("none", True)
    err = capsys.readouterr().err
    assert "kernel wide is open to agents: a model may use it whatever its sandbox" in err
