"""sandbox.toml's `jupyter_api`: a kernel started through the stock Jupyter API (`/api/kernels`,
a notebook in someone's JupyterLab) runs under that profile when the config names one, also
after a restart."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.cells import KERNELS, output_texts, run
from tests.support.gateways import GatewayProcess, client
from tests.support.sandboxed_gateways import sandbox_root

CONFIG = 'jupyter_api = "strict"\n'


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """A fake home with a key, a config naming `jupyter_api`, and a project, outside the host's
    /tmp (which a sandbox replaces)."""
    with sandbox_root() as path:
        (path / "home" / ".ssh").mkdir(parents=True)
        (path / "home" / ".ssh" / "id_rsa").write_text("SECRET\n")
        (path / "config" / "loomgate" / "sandbox.toml").write_text(CONFIG)
        yield path


@pytest.fixture(scope="module")
def gateway(root: Path) -> Iterator[GatewayProcess]:
    """A gateway whose sandbox.toml puts the stock API's kernels under `strict`, working in the
    project (where Jupyter starts its kernels)."""
    env = {"HOME": str(root / "home"), "XDG_CONFIG_HOME": str(root / "config")}
    started = GatewayProcess(root / "state", env=env, cwd=root / "project")
    try:
        started.start()
        yield started
    finally:
        started.stop()


@pytest.fixture
async def http(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for the gateway."""
    async with client(gateway) as c:
        yield c


async def test_the_jupyter_api_profile_confines_a_kernel_of_the_stock_api(
    http: httpx.AsyncClient, root: Path
) -> None:
    key = root / "home" / ".ssh" / "id_rsa"
    server = socket.create_server(("127.0.0.1", 0))
    reach = (
        f"import socket; socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), "
        "timeout=5).close()"
    )
    r = await http.post("/api/kernels", json={"name": "python3"})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["id"]
    try:
        sandbox = (await http.get(f"{KERNELS}/{kernel_id}")).json()["kernel"]["sandbox"]
        assert sandbox["profile"] == "strict"
        assert sandbox["network"] is False
        assert "bubblewrap" in sandbox["mechanism"]
        # A restart through the same API starts the kernel again under the same profile.
        for turn in ("started", "restarted"):
            secret = await run(http, kernel_id, f"print(open({str(key)!r}).read())")
            assert secret["state"] == "error", (turn, secret)
            assert "SECRET" not in output_texts(secret), turn
            assert secret["sandbox_failure"]["rule"] == "hidden", turn
            assert secret["sandbox_failure"]["profile"] == "strict", turn
            offline = await run(http, kernel_id, reach)
            assert offline["sandbox_failure"]["rule"] == "network", (turn, offline)
            if turn == "started":
                restart = await http.post(f"/api/kernels/{kernel_id}/restart")
                assert restart.status_code == 200, restart.text
    finally:
        server.close()
        await http.delete(f"/api/kernels/{kernel_id}")


async def test_loomgates_own_kernels_keep_the_default_profile(
    http: httpx.AsyncClient, root: Path
) -> None:
    # `jupyter_api` chooses for the stock API only: loomgate's own kernels get `default`.
    r = await http.post(KERNELS, json={"cwd": str(root / "project")})
    assert r.status_code == 201, r.text
    kernel = r.json()["kernel"]
    try:
        assert kernel["sandbox"]["profile"] == "workspace"
    finally:
        await http.delete(f"{KERNELS}/{kernel['id']}")
