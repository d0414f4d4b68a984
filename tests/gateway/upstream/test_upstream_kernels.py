"""Every kernel we claim through upstream mode: started on a stock Jupyter Server, Kernel Gateway
and Enterprise Gateway, recorded here under its own spec, its long output whole, reset, and a
kernel that does not start leaves nothing on the upstream."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.cells import output_texts, run
from tests.support.gateways import GatewayProcess
from tests.support.kernel_specs import BY_SPEC, KernelUnderTest, write_kernel_specs
from tests.support.upstreams import KINDS, UpstreamProcess, running, upstream_gateway

API = "/api/loomgate/kernels"
CLAIMED = tuple(BY_SPEC[spec] for spec in ("py", "xpython", "bash", "deno"))
LINES = 2_000
# A kernel whose messages are not numbered cannot have a drop told (docs/kernels.md): its long
# cell stays within what one of ZMQ's default high-water marks queues (1,000 messages, at the
# kernel's publisher or the upstream's subscriber; xeus-python sends two per line), so that
# nothing can be dropped on the way however long the upstream stalls.
UNTOLD_LINES = 400


def crashing_spec(data_dir: Path) -> None:
    """Write a kernel spec whose process exits at once, saying why."""
    code = "import sys; print('no such module: wibble', file=sys.stderr); sys.exit(3)"
    spec = {"argv": [sys.executable, "-c", code, "{connection_file}"], "language": "python"}
    directory = data_dir / "kernels" / "crashing"
    directory.mkdir(parents=True)
    (directory / "kernel.json").write_text(json.dumps({**spec, "display_name": "crashing"}))


@pytest.fixture(scope="module", params=KINDS)
def upstream(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[UpstreamProcess]:
    """An upstream of each kind that knows every kernel's spec (in its own data dir)."""
    home = tmp_path_factory.mktemp("upstream")
    data = home / "jupyter-data"
    write_kernel_specs(data, python_kernels=True)
    crashing_spec(data)
    with running(home, request.param) as server:
        yield server


@pytest.fixture(scope="module")
def recorder(
    upstream: UpstreamProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """A gateway in upstream mode on `upstream`."""
    gateway = upstream_gateway(
        tmp_path_factory.mktemp("gw") / "state", upstream.url, upstream.token
    )
    try:
        yield gateway.start()
    finally:
        gateway.stop()


@pytest.mark.parametrize("kernel", CLAIMED, ids=str)
async def test_a_kernel_on_the_upstream_is_recorded_and_reset_here(
    http: httpx.AsyncClient, kernel: KernelUnderTest, upstream: UpstreamProcess
) -> None:
    r = await http.post(API, json={"kernel_spec": kernel.spec})
    assert r.status_code == 201, r.text
    model = r.json()["kernel"]
    assert (model["kernel_spec"], model["language"]) == (kernel.spec, kernel.language)
    ref = model["id"]
    try:
        assert ref in upstream.kernels()
        execution = await run(http, ref, kernel.echo.format(text="upstream"))
        assert output_texts(execution) == ["upstream"]
        lines = LINES if kernel.numbered else UNTOLD_LINES
        long = await run(http, ref, kernel.count.format(n=lines), head=1, tail=1)
        # Every line is in the record, or the record marks where some were dropped: held back
        # by the upstream (a stock Jupyter Server's IOPub rate limit: xeus-python sends two
        # messages per line), or a run of numbers missing (the kernel's publisher dropped them
        # as the upstream fell behind).
        assert long["streams"]["stdout"]["lines"] == lines or long["gaps"], long
        r = await http.post(f"{API}/{ref}/reset")
        assert r.status_code == 200, r.text
        again = await run(http, ref, kernel.echo.format(text="again"))
        assert (again["state"], output_texts(again)) == ("completed", ["again"])
    finally:
        await http.delete(f"{API}/{ref}")


async def test_a_kernel_that_does_not_start_leaves_nothing_on_the_upstream(
    http: httpx.AsyncClient, upstream: UpstreamProcess
) -> None:
    before = set(upstream.kernels())
    r = await http.post(API, json={"kernel_spec": "crashing"})
    assert r.status_code == 503, r.text
    assert "\n" not in r.json()["message"] and "\x1b" not in r.json()["message"]
    assert set(upstream.kernels()) == before
    listed = (await http.get(API, params={"all": "true"})).json()["kernels"]
    assert [kernel for kernel in listed if kernel["kernel_spec"] == "crashing"] == []
