"""`loomgate run --kernel K --sandbox NAME`: what it asks a gateway that answers from a script
(the person may widen: stricter_only false), and how a kernel under another profile is told."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from loomgate.translator.cli.errors import UsageError
from loomgate.translator.cli.run import bound_kernel, run_command
from loomgate.translator.client.errors import Conflict
from loomgate.translator.client.gateway import GatewayClient
from tests.support.scripted_gateway import (
    TOKEN,
    Answer,
    Route,
    ScriptedGateway,
    created,
    refusal,
    scripted_gateway,
)
from tests.support.wire_values import execution, failure, kernel, lines, read, sandbox

NONE = sandbox(profile="none", writable=[], hidden=[], memory=None, processes=None, mechanism="")


@asynccontextmanager
async def client_of(
    routes: dict[str, Route],
) -> AsyncIterator[tuple[ScriptedGateway, GatewayClient]]:
    """Yield a scripted gateway answering `routes` and a client of it."""
    async with (
        scripted_gateway(routes) as gateway,
        GatewayClient(gateway.url, TOKEN) as client,
    ):
        yield gateway, client


async def test_a_new_kernel_starts_under_the_persons_profile(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with client_of({"POST kernels": lambda body: created(NONE)}) as (gateway, client):
        kernel_id = await bound_kernel(client, "wide", "none")
    assert kernel_id == kernel()["id"]
    [body] = gateway.bodies("POST kernels")
    assert (body["name"], body["sandbox"], body["stricter_only"]) == ("wide", "none", False)
    assert capsys.readouterr().err.split("\n")[1] == "sandbox: none"


async def test_without_the_flag_no_profile_is_sent() -> None:
    async with client_of({"POST kernels": lambda body: created(sandbox())}) as (gateway, client):
        await bound_kernel(client, "plain")
    [body] = gateway.bodies("POST kernels")
    assert "sandbox" not in body and "stricter_only" not in body


async def test_a_kernel_under_another_profile_gets_the_gateways_answer() -> None:
    message = "kernel wide runs under the profile workspace; its profile is fixed for its life"

    def conflict(body: dict[str, Any]) -> Answer:
        return refusal(409, "conflict", message)

    routes = {
        "GET kernels/wide": lambda body: (200, {"kernel": kernel(name="wide", sandbox=sandbox())}),
        "POST kernels": conflict,
    }
    async with client_of(routes) as (gateway, client):
        with pytest.raises(Conflict) as refused:
            await bound_kernel(client, "wide", "none")
    assert str(refused.value) == message  # shown as the gateway said it
    assert gateway.bodies("POST kernels")[0]["sandbox"] == "none"


async def test_a_kernel_under_the_same_profile_is_used_as_it_is() -> None:
    routes = {"GET kernels/wide": lambda body: (200, {"kernel": kernel(name="wide", sandbox=NONE)})}
    async with client_of(routes) as (gateway, client):
        assert await bound_kernel(client, "wide", "none") == kernel()["id"]
    assert gateway.bodies("POST kernels") == []


async def test_a_kernel_named_by_its_id_under_another_profile_is_refused() -> None:
    short = kernel()["id"][:8]
    routes = {
        f"GET kernels/{short}": lambda body: (
            200,
            {"kernel": kernel(name="lab", sandbox=sandbox())},
        )
    }
    async with client_of(routes) as (_, client):
        with pytest.raises(UsageError) as refused:
            await bound_kernel(client, short, "none")
    assert str(refused.value) == (
        "kernel lab runs under the sandbox profile workspace, fixed for its life; leave out "
        "--sandbox to use it as it is, or give --kernel a new name"
    )


async def test_an_unconfined_kernel_is_what_none_asks_for() -> None:
    async with client_of({"POST kernels": lambda body: created(None)}) as (gateway, client):
        assert await bound_kernel(client, "wide", "none") == kernel()["id"]
    assert [method for method, _, _ in gateway.requests if method == "DELETE"] == []


async def test_a_gateway_that_ignores_the_profile_gets_its_kernel_stopped() -> None:
    routes = {
        "POST kernels": lambda body: created(None),
        f"DELETE kernels/{kernel()['id']}": lambda body: (200, {"kernel": kernel(alive=False)}),
    }
    async with client_of(routes) as (gateway, client):
        with pytest.raises(UsageError) as refused:
            await bound_kernel(client, "wide", "strict")
    assert str(refused.value) == (
        f"the gateway at {gateway.url} does not run kernels under sandbox profiles, so no "
        "kernel runs under strict; leave out --sandbox for an unconfined kernel"
    )
    assert [path for method, path, _ in gateway.requests if method == "DELETE"] == [
        f"kernels/{kernel()['id']}"
    ]


async def test_run_names_the_rule_its_cell_broke(capsys: pytest.CaptureFixture[str]) -> None:
    kernel_id = kernel()["id"]
    broken = execution(
        kernel_id=kernel_id,
        state="error",
        error={"name": "PermissionError", "value": "[Errno 13] Permission denied"},
        sandbox_failure=failure("hidden", "/home/p/.ssh/id_rsa"),
    )

    def answered(body: dict[str, Any]) -> Answer:
        return 200, {"execution": broken, "returned": "final"}

    output = read(number=5, stream="combined", total=1, last=1, lines=lines(("+error", "denied")))
    routes = {
        "GET kernels/default": lambda body: (200, {"kernel": kernel(sandbox=sandbox())}),
        f"GET kernels/{kernel_id}": lambda body: (200, {"kernel": kernel(sandbox=sandbox())}),
        f"POST kernels/{kernel_id}/executions": answered,
        f"GET kernels/{kernel_id}/executions/5": answered,
        f"GET kernels/{kernel_id}/executions/5/streams/combined": lambda body: (200, output),
    }
    args = argparse.Namespace(code="open('~/.ssh/id_rsa')", file=None, kernel=None, json=False)
    async with client_of(routes) as (_, client):
        status = await run_command(client, args)
    assert status == 1
    assert capsys.readouterr().out.split("\n") == [
        "In [5]:",
        "denied",
        "/home/p/.ssh/id_rsa is hidden from this kernel by its sandbox (workspace).",
        "[error after 1.2 s]",
        "",
    ]
