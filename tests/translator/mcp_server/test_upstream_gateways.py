"""A gateways.toml entry of kind = "jupyter": the translator starts a local gateway in upstream
mode for it on first use, and the model uses the plain Jupyter server like any gateway."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from loomgate.shared.paths import read_gateway_file
from loomgate.translator.client.local_gateway import UPSTREAMS_DIR
from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.gateways import stop_upstream_gateways
from tests.support.jupyter_lab import loomgate_cli
from tests.support.mcp_clients import text
from tests.support.upstreams import KINDS, UpstreamProcess, running


@pytest.fixture(params=KINDS)
def upstream(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UpstreamProcess]:
    """An upstream of each kind, of the test's own."""
    with running(tmp_path / "upstream", request.param) as server:
        yield server


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The translator's state dir; every upstream-mode gateway started under it is stopped."""
    directory = tmp_path / "state"
    monkeypatch.setenv("LOOMGATE_STATE_DIR", str(directory))
    try:
        yield directory
    finally:
        stop_upstream_gateways(directory)


async def test_a_jupyter_entry_is_reached_through_an_upstream_mode_gateway(
    upstream: UpstreamProcess, state: Path, config_dir: Path, tmp_path: Path
) -> None:
    (config_dir / "gateways.toml").write_text(
        f'[gateways.hub]\nkind = "jupyter"\nurl = "{upstream.url}"\ntoken_env = "HUB_TOKEN"\n'
    )
    (config_dir / "startup.py").write_text("STARTED_BY_LOOMGATE = True\n")
    settings = Settings(
        gateway="hub", autostart=True, cwd=str(tmp_path), env={"HUB_TOKEN": upstream.token}
    )
    async with Client(build_server(settings), mode="legacy") as mcp:
        created = await mcp.call_tool("connect", {"kernel": "shared"})
        assert not created.is_error, text(created)
        ran = await mcp.call_tool("run_cell", {"code": "answer = 6 * 7\nprint(answer)"})
        assert text(ran).endswith("42"), text(ran)
        listing = text(await mcp.call_tool("list_kernels", {}))
        assert "shared" in listing and "hub" in listing, listing
        # A kernel someone else started on the upstream: listed, attached by its id, and given
        # the inspectors but not this user's startup.py.
        theirs = upstream.start_kernel()
        listing = text(await mcp.call_tool("list_kernels", {}))
        assert "Running on hub's upstream, not recorded yet" in listing, listing
        assert theirs[:8] in listing
        attached = await mcp.call_tool("connect", {"kernel": theirs[:8]})
        assert "Someone else started this kernel on the upstream" in text(attached), text(attached)
        seen = await mcp.call_tool("run_cell", {"code": "'STARTED_BY_LOOMGATE' in dir()"})
        assert text(seen).endswith("False"), text(seen)
        refused = await mcp.call_tool("stop_kernel", {"kernel": theirs[:8]})
        assert refused.is_error and "force=true" in text(refused), text(refused)
        assert theirs in upstream.kernels()
        stopped = await mcp.call_tool("stop_kernel", {"kernel": theirs[:8], "force": True})
        assert not stopped.is_error, text(stopped)
        await mcp.call_tool("connect", {"kernel": "shared"})
        mine = await mcp.call_tool("run_cell", {"code": "STARTED_BY_LOOMGATE"})
        assert text(mine).endswith("True"), text(mine)
    [gateway_dir] = list((state / UPSTREAMS_DIR).iterdir())
    first = read_gateway_file(gateway_dir)
    assert first is not None
    assert len(upstream.kernels()) == 1  # the kernel runs on the upstream
    # A later conversation reuses the same gateway and finds the kernel and its variables.
    async with Client(build_server(settings), mode="legacy") as mcp:
        attached = await mcp.call_tool("connect", {"kernel": "shared"})
        assert not attached.is_error, text(attached)
        again = await mcp.call_tool("run_cell", {"code": "answer"})
        assert text(again).endswith("Out[3]: 42"), text(again)
    second = read_gateway_file(gateway_dir)
    assert second is not None and second["pid"] == first["pid"]
    # The person's CLI reaches it the same way, and controls that gateway.
    env = {**os.environ, "HUB_TOKEN": upstream.token}
    ran = loomgate_cli(env, "--gateway", "hub", "run", "--kernel", "shared", "answer + 1")
    assert ran.returncode == 0 and "Out[4]: 43" in ran.stdout, ran.stdout + ran.stderr
    status = loomgate_cli(env, "--gateway", "hub", "gateway", "status")
    assert f"upstream: {upstream.url}" in status.stdout, status.stdout + status.stderr
    foreground = loomgate_cli(env, "--gateway", "hub", "gateway", "start", "--foreground")
    assert foreground.returncode != 0
    assert "are for the local gateway; the gateway for hub is started on first use" in (
        foreground.stderr
    ), foreground.stderr
    stopped = loomgate_cli(env, "--gateway", "hub", "gateway", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert upstream.kernels() == []  # stopping the gateway stopped its kernels there
    assert upstream.token not in (gateway_dir / "gateway.log").read_text()
