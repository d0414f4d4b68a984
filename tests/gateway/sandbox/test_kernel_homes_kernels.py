"""A confined kernel's own cache and matplotlib homes on a real gateway: writable inside, its
own (nothing lands in the person's home), kept across a reset, removed with the kernel; the
person's config home stays the kernel's to read; an unconfined kernel keeps the person's.

The gateway's HOME and config lie under /var/tmp: a confined kernel's /tmp is its own.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cells import KERNELS, output_texts, run
from tests.support.gateways import GatewayProcess, client
from tests.support.sandboxed_gateways import GatewayHome, gateway_home, home_gateway

# What a cell reports of the kernel's homes: the variables, and whether matplotlib's check of
# its dir (os.access W_OK) and the cache home would pass; it writes into the cache home.
REPORT = """\
import json, os
names = ("XDG_CACHE_HOME", "MPLCONFIGDIR", "MATPLOTLIBRC", "XDG_CONFIG_HOME")
found = {name: os.environ.get(name) for name in names}
for name in ("XDG_CACHE_HOME", "MPLCONFIGDIR"):
    found[name + " writable"] = bool(found[name]) and os.access(found[name], os.W_OK)
print(json.dumps(found))
"""
WRITE = (
    "import os, pathlib; d = pathlib.Path(os.environ['XDG_CACHE_HOME'], 'tool'); "
    "d.mkdir(exist_ok=True); (d / 'entry').write_text('kept')"
)
READ = (
    "import os, pathlib; "
    "print(pathlib.Path(os.environ['XDG_CACHE_HOME'], 'tool/entry').read_text())"
)


Place = GatewayHome


@pytest.fixture(scope="module")
def place() -> Iterator[Place]:
    """The dirs, under /var/tmp; removed afterwards."""
    with gateway_home("homes") as here:
        yield here


@pytest.fixture(scope="module")
def gateway(place: Place) -> Iterator[GatewayProcess]:
    """A gateway under the shipped default profile, with the fake home."""
    with home_gateway(place) as started:
        yield started


@pytest.fixture
async def http(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for the gateway."""
    async with client(gateway) as c:
        yield c


async def start(http: httpx.AsyncClient, place: Place, profile: str) -> dict[str, Any]:
    """Start a kernel under `profile` in the project and return it."""
    r = await http.post(KERNELS, json={"sandbox": profile, "cwd": str(place.project)})
    assert r.status_code == 201, r.text
    kernel: dict[str, Any] = r.json()["kernel"]
    return kernel


async def printed(http: httpx.AsyncClient, kernel: str, code: str) -> list[str]:
    """Run `code` and return the lines it printed (failing on an error or a sandbox note)."""
    execution = await run(http, kernel, code)
    assert execution["state"] == "completed", execution
    assert execution.get("sandbox_failure") is None, execution
    return output_texts(execution)


@pytest.mark.parametrize("profile", ["workspace", "strict"])
async def test_a_confined_kernel_has_writable_homes_of_its_own(
    http: httpx.AsyncClient, place: Place, profile: str
) -> None:
    kernel = await start(http, place, profile)
    kid = kernel["id"]
    homes = Path(kernel["sandbox"]["packages"]).parent / "homes"
    try:
        found = json.loads((await printed(http, kid, REPORT))[0])
        assert found == {
            "XDG_CACHE_HOME": str(homes / "cache"),
            "MPLCONFIGDIR": str(homes / "matplotlib"),
            "MATPLOTLIBRC": str(place.config / "matplotlib"),  # the person's matplotlibrc
            "XDG_CONFIG_HOME": str(place.config),  # the person's, read-only
            "XDG_CACHE_HOME writable": True,
            "MPLCONFIGDIR writable": True,
        }
        await printed(http, kid, WRITE)
        assert (homes / "cache" / "tool" / "entry").read_text() == "kept"
        assert not (place.home / ".cache").exists()  # nothing in the person's home
        # A reset starts a new process, with the same homes and what was written there.
        r = await http.post(f"{KERNELS}/{kid}/reset")
        assert r.status_code == 200, r.text
        assert json.loads((await printed(http, kid, REPORT))[0]) == found
        assert await printed(http, kid, READ) == ["kept"]
    finally:
        stopped = await http.delete(f"{KERNELS}/{kid}")
    assert stopped.status_code == 200, stopped.text
    assert not homes.exists()


async def test_an_unconfined_kernel_keeps_the_persons_dirs(
    http: httpx.AsyncClient, place: Place
) -> None:
    kernel = await start(http, place, "none")
    try:
        found = json.loads((await printed(http, kernel["id"], REPORT))[0])
        assert found["XDG_CACHE_HOME"] == os.environ.get("XDG_CACHE_HOME")
        assert found["MPLCONFIGDIR"] == os.environ.get("MPLCONFIGDIR")
    finally:
        await http.delete(f"{KERNELS}/{kernel['id']}")
