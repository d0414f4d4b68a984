"""`loomgate run --kernel K --sandbox NAME` against a real gateway whose kernels are sandboxed:
the person may widen (a profile looser than the default), and a kernel under another profile
is told; an unconfined kernel of an upstream-mode gateway is what `none` asks for, and a
gateway from before sandboxes (which ignores the profile) answers from a script."""

from __future__ import annotations

import argparse
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from loomgate.translator.cli.errors import UsageError
from loomgate.translator.cli.run import bound_kernel, run_command
from loomgate.translator.client.errors import Conflict
from loomgate.translator.client.gateway import GatewayClient
from tests.support.cells import KERNELS
from tests.support.gateways import GatewayProcess, client
from tests.support.sandboxed_gateways import SandboxedGateway
from tests.support.scripted_gateway import TOKEN, scripted_gateway, started_unconfined
from tests.support.upstreams import running, upstream_gateway
from tests.support.wire_values import kernel


@asynccontextmanager
async def clients_of(
    gateway: GatewayProcess,
) -> AsyncIterator[tuple[GatewayClient, httpx.AsyncClient]]:
    """Yield the CLI's client of `gateway` and an HTTP client of it."""
    async with GatewayClient(gateway.url, gateway.token) as cli, client(gateway) as http:
        yield cli, http


@pytest.fixture
def in_project(sandboxed: SandboxedGateway, monkeypatch: pytest.MonkeyPatch) -> SandboxedGateway:
    """The sandboxed gateway, with the test working in its project (the CLI's kernels' cwd)."""
    monkeypatch.chdir(sandboxed.project)
    return sandboxed


async def started(http: httpx.AsyncClient, name: str, profile: str, cwd: Path) -> str:
    """Start the persistent kernel `name` under `profile` over REST; return its id."""
    r = await http.post(KERNELS, json={"name": name, "sandbox": profile, "cwd": str(cwd)})
    assert r.status_code == 201, r.text
    kernel_id: str = r.json()["kernel"]["id"]
    return kernel_id


async def live(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """Return the gateway's live kernels by id (stopped ones stay listed)."""
    r = await http.get(KERNELS)
    assert r.status_code == 200, r.text
    return {k["id"]: k for k in r.json()["kernels"] if k["alive"]}


async def test_a_new_kernel_starts_under_the_persons_profile(
    in_project: SandboxedGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    async with clients_of(in_project.gateway) as (cli, http):
        kernel_id = await bound_kernel(cli, "wide", "none")  # looser than the default
        kernels = await live(http)
    assert list(kernels) == [kernel_id]
    assert (kernels[kernel_id]["name"], kernels[kernel_id]["sandbox"]["profile"]) == (
        "wide",
        "none",
    )
    assert capsys.readouterr().err.split("\n")[1] == "sandbox: none"


@pytest.mark.parametrize("default", ["workspace", "strict"])
async def test_without_the_flag_a_kernel_gets_the_gateways_default(
    default: str, in_project: SandboxedGateway
) -> None:
    with in_project.default(default):
        async with clients_of(in_project.gateway) as (cli, http):
            kernel_id = await bound_kernel(cli, "plain")
            kernels = await live(http)
    assert kernels[kernel_id]["sandbox"]["profile"] == default
    assert kernels[kernel_id]["cwd"] == str(in_project.project)


async def test_a_kernel_under_another_profile_gets_the_gateways_answer(
    in_project: SandboxedGateway,
) -> None:
    async with clients_of(in_project.gateway) as (cli, http):
        kernel_id = await started(http, "wide", "workspace", in_project.project)
        with pytest.raises(Conflict) as refused:
            await bound_kernel(cli, "wide", "none")
        kernels = await live(http)
    # Shown as the gateway said it (its 409 to the request for a kernel under none).
    assert str(refused.value) == (
        "kernel 'wide' already runs under the sandbox profile workspace, not 'none'; a kernel's "
        "profile is fixed for its life: choose another name or stop it"
    )
    assert list(kernels) == [kernel_id]


async def test_a_kernel_under_the_same_profile_is_used_as_it_is(
    in_project: SandboxedGateway,
) -> None:
    async with clients_of(in_project.gateway) as (cli, http):
        kernel_id = await started(http, "wide", "none", in_project.project)
        assert await bound_kernel(cli, "wide", "none") == kernel_id
        assert list(await live(http)) == [kernel_id]


async def test_a_kernel_named_by_its_id_under_another_profile_is_refused(
    in_project: SandboxedGateway,
) -> None:
    async with clients_of(in_project.gateway) as (cli, http):
        kernel_id = await started(http, "lab", "workspace", in_project.project)
        with pytest.raises(UsageError) as refused:
            await bound_kernel(cli, kernel_id[:8], "none")
        assert list(await live(http)) == [kernel_id]
    assert str(refused.value) == (
        "kernel lab runs under the sandbox profile workspace, fixed for its life; leave out "
        "--sandbox to use it as it is, or give --kernel a new name"
    )


async def test_an_unconfined_kernel_is_what_none_asks_for(tmp_path: Path) -> None:
    # An upstream-mode gateway starts no kernel under a profile: its kernels have no sandbox.
    with running(tmp_path / "upstream", "jupyter_server") as upstream:
        gateway = upstream_gateway(tmp_path / "state", upstream.url, upstream.token)
        try:
            gateway.start()
            async with clients_of(gateway) as (cli, http):
                kernel_id = await bound_kernel(cli, "wide", "none")
                kernels = await live(http)
                await http.delete(f"{KERNELS}/{kernel_id}")
        finally:
            gateway.stop()
    assert kernels[kernel_id]["sandbox"] is None  # and it was not stopped
    assert kernels[kernel_id]["name"] == "wide"


async def test_a_gateway_that_ignores_the_profile_gets_its_kernel_stopped() -> None:
    # Only a gateway from before sandboxes answers a profile with an unconfined kernel.
    routes = {
        "POST kernels": started_unconfined,
        f"DELETE kernels/{kernel()['id']}": lambda body: (200, {"kernel": kernel(alive=False)}),
    }
    async with scripted_gateway(routes) as gateway, GatewayClient(gateway.url, TOKEN) as cli:
        with pytest.raises(UsageError) as refused:
            await bound_kernel(cli, "wide", "strict")
    assert str(refused.value) == (
        f"the gateway at {gateway.url} does not run kernels under sandbox profiles, so no "
        "kernel runs under strict; leave out --sandbox for an unconfined kernel"
    )
    assert [path for method, path, _ in gateway.requests if method == "DELETE"] == [
        f"kernels/{kernel()['id']}"
    ]


async def test_run_names_the_rule_its_cell_broke(
    in_project: SandboxedGateway, capsys: pytest.CaptureFixture[str]
) -> None:
    token = in_project.gateway.state_dir / "token"
    args = argparse.Namespace(code=f"open({str(token)!r})", file=None, kernel=None, json=False)
    async with GatewayClient(in_project.gateway.url, in_project.gateway.token) as cli:
        status = await run_command(cli, args)
    assert status == 1
    out = capsys.readouterr().out.split("\n")
    assert out[0] == "In [1]:"
    assert f"PermissionError: [Errno 13] Permission denied: '{token}'" in out
    assert out[-3] == f"{token} is hidden from this kernel by its sandbox (workspace)."
    assert re.fullmatch(r"\[error after [\d.]+ (ms|s)\]", out[-2]), out[-2]  # 1.2 s when loaded
    assert out[-1] == ""
