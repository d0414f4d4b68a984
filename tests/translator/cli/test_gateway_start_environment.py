"""What `loomgate gateway start` passes to the gateway it starts: LOOMGATE_SANDBOX_MECHANISM,
which the gateway's choice of mechanism then follows, and no variable whose value carries a
URL's credentials, neither to the gateway nor to its kernels."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from loomgate.shared.paths import GatewayFile, read_gateway_file
from loomgate.translator.client.local_gateway import daemon_environment
from tests.support.gateways import free_port, stop_local_gateway
from tests.translator.cli.test_commands import loomgate

INDEX = "https://someone:SECRET-of-the-index@index.example/simple"


@pytest.mark.parametrize(
    ("name", "value", "passed"),
    [
        ("LOOMGATE_SANDBOX_MECHANISM", "landlock", True),
        ("LOOMGATE_STATE_DIR", "/srv/loomgate", True),
        ("UV_INDEX_URL", "https://index.example/simple", True),
        ("UV_INDEX_URL", INDEX, False),
        ("JUPYTER_PATH", "https://u:p@example.com/x", False),  # whatever the name
        ("LOOMGATE_TOKEN", "t", False),
        ("LOOMGATE_URL", "http://127.0.0.1:1", False),
    ],
)
def test_what_a_started_gateway_is_passed(name: str, value: str, passed: bool) -> None:
    assert daemon_environment({"PATH": "/usr/bin", name: value}) == (
        {"PATH": "/usr/bin", name: value} if passed else {"PATH": "/usr/bin"}
    )


@pytest.fixture
async def started(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[GatewayFile, dict[str, str]]]:
    """A gateway `loomgate gateway start` started with the variables of the test's parameter
    added to the CLI's environment: its gateway.json and that environment; stopped afterwards."""
    state = tmp_path / "state"
    added: dict[str, str] = request.param
    env = {
        **os.environ,
        "LOOMGATE_STATE_DIR": str(state),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        **added,
    }
    try:
        status, _, err = await loomgate(env, "gateway", "start", "--port", str(free_port()))
        assert status == 0, err
        info = read_gateway_file(state)
        assert info is not None
        yield info, env
    finally:
        stop_local_gateway(state)


def environ_of(pid: int) -> dict[str, str]:
    """Return the environment process `pid` started with."""
    entries = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(e.decode().partition("=")[::2] for e in entries if e)


@pytest.mark.parametrize("started", [{"LOOMGATE_SANDBOX_MECHANISM": "landlock"}], indirect=True)
async def test_gateway_start_passes_the_forced_sandbox_mechanism(
    started: tuple[GatewayFile, dict[str, str]],
) -> None:
    info, _ = started
    assert environ_of(info["pid"]).get("LOOMGATE_SANDBOX_MECHANISM") == "landlock"
    headers = {"Authorization": f"token {info['token']}"}
    async with httpx.AsyncClient(base_url=info["url"], headers=headers) as http:
        about = (await http.get("/api/loomgate/info")).json()
    refused = about["sandbox_refused"]
    assert "bubblewrap on PATH: not tried (LOOMGATE_SANDBOX_MECHANISM=landlock)" in refused
    mechanism = about["sandbox_mechanism"]
    assert mechanism is None or mechanism.startswith("landlock only"), about


@pytest.mark.parametrize(
    "started", [{"UV_INDEX_URL": INDEX, "UV_CACHE_DIR": "/nonexistent/uv-cache"}], indirect=True
)
async def test_gateway_start_passes_no_credentials_in_a_url(
    started: tuple[GatewayFile, dict[str, str]],
) -> None:
    info, env = started
    passed = environ_of(info["pid"])
    assert "UV_INDEX_URL" not in passed
    assert passed.get("UV_CACHE_DIR") == "/nonexistent/uv-cache"  # its name's prefix passes
    cell = "import os, json; print(json.dumps(sorted(os.environ.items())))"
    status, out, err = await loomgate(env, "run", cell)
    assert status == 0, err
    seen = dict(json.loads(out.splitlines()[1]))
    assert not any("SECRET-of-the-index" in value for value in seen.values())
