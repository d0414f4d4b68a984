"""A confined kernel's network on a real gateway: its own namespace, reached only through the
gateway's proxy, which lets it reach what its profile names and refuses the rest, with the rule
line; pip installs through it; a kernel taken back after a SIGKILL has its network again; a
gateway run from under the host's /tmp (a clone there) gives its kernels the network its status
names; the same under Landlock alone (under profiles with no writable dir: it refuses the
others). Traffic goes only to servers this test starts on 127.0.0.1."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

import loomgate.gateway
from tests.gateway.sandbox.test_packages_kernels import wheel
from tests.support.bridges import file_server, served
from tests.support.cells import KERNELS
from tests.support.gateways import GatewayProcess, client
from tests.support.kernel_specs import write_kernel_specs

TIMEOUT = 120


@dataclass
class Place:
    """A project, a config dir, a gateway's state, and the files the test's server serves."""

    root: Path
    port: int  # the test's HTTP server on 127.0.0.1

    @property
    def project(self) -> Path:
        """Return the dir its kernels work in."""
        return self.root / "project"

    @property
    def config(self) -> Path:
        """Return its XDG_CONFIG_HOME."""
        return self.root / "config"


def write_profiles(place: Place) -> None:
    """The default (workspace), `local`: workspace naming the test's server, and each without a
    writable dir (`held`, `local-held`), as Landlock alone can hold them."""
    (place.config / "loomgate" / "sandbox.toml").write_text(
        f'default = "workspace"\n\n[profiles.local]\nnetwork = ["127.0.0.1:{place.port}"]\n\n'
        "[profiles.held]\nwritable = []\n\n"
        '[profiles.local-held]\nextends = "local"\nwritable = []\n'
    )


@pytest.fixture(scope="module")
def place() -> Iterator[Place]:
    """A root under /var/tmp (a confined kernel's /tmp is its own), serving `files/` on
    127.0.0.1: a page, and a simple index with one wheel for pip."""
    root = Path("/var/tmp") / f"loomgate-network-{uuid.uuid4().hex[:8]}"
    files = root / "files"
    (files / "simple" / "netpkg").mkdir(parents=True)
    (root / "project").mkdir()
    (root / "config" / "loomgate").mkdir(parents=True)
    (files / "page.txt").write_text("hello from loopback\n")
    built = wheel(files, "netpkg", "1.0")
    (files / "simple" / "netpkg" / "index.html").write_text(
        f'<html><body><a href="../../{built.name}">{built.name}</a></body></html>\n'
    )
    try:
        with served(file_server(files)) as port:
            here = Place(root, port)
            write_profiles(here)
            yield here
    finally:
        shutil.rmtree(root, ignore_errors=True)


def gateway_in(place: Place, name: str, **env: str) -> GatewayProcess:
    """Return a (not started) gateway of `place` with its own state dir."""
    return GatewayProcess(
        place.root / name, env={"XDG_CONFIG_HOME": str(place.config), **env}, cwd=place.project
    )


@pytest.fixture(scope="module")
def gateway(place: Place) -> Iterator[GatewayProcess]:
    """A gateway whose kernels run under the shipped default, workspace."""
    process = gateway_in(place, "state")
    try:
        process.start()
        yield process
    finally:
        process.stop()


@pytest.fixture
async def http(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the module's gateway."""
    async with client(gateway) as c:
        yield c


async def kernel(http: httpx.AsyncClient, name: str, place: Place, **body: Any) -> str:
    """Create kernel `name` working in the project; return its id."""
    r = await http.post(KERNELS, json={"name": name, "cwd": str(place.project), **body})
    assert r.status_code == 201, r.text
    return str(r.json()["kernel"]["id"])


async def run(http: httpx.AsyncClient, kernel_id: str, code: str) -> dict[str, Any]:
    """Run `code` to its end; return its execution with up to 50 lines of output."""
    body = {"code": code, "wait": TIMEOUT, "head": 50}
    r = await http.post(f"{KERNELS}/{kernel_id}/executions", json=body, timeout=TIMEOUT + 30)
    assert r.status_code == 201, r.text
    execution: dict[str, Any] = r.json()["execution"]
    assert execution["state"] in ("completed", "error"), execution
    return execution


def texts(execution: dict[str, Any]) -> list[str]:
    """Return the execution's output lines."""
    return [line["text"] for line in execution["output"]["head"]]


FETCH = (
    "import urllib.request\n"
    "print(urllib.request.urlopen('http://127.0.0.1:{port}/page.txt', timeout=30).read().decode())"
)
CHILDREN = "/proc/{os.getpid()}/task/{os.getpid()}/children"
RAW = "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=10)"


async def test_a_named_destination_is_reached_through_the_proxy(
    http: httpx.AsyncClient, place: Place
) -> None:
    kernel_id = await kernel(http, "named", place, sandbox="local")
    fetched = await run(http, kernel_id, FETCH.format(port=place.port))
    assert fetched["state"] == "completed" and "hello from loopback" in texts(fetched)
    # curl reads the lower-case variable; the proxy is a bridge on the kernel's own loopback.
    curl = await run(http, kernel_id, f"!curl -sS http://127.0.0.1:{place.port}/page.txt")
    assert "hello from loopback" in texts(curl)
    shown = await run(http, kernel_id, "import os\nprint(os.environ['HTTPS_PROXY'])")
    assert texts(shown) == ["http://127.0.0.1:3128"]
    # The bridge is the sandbox init's child, not the kernel's: ipykernel waits at its shutdown
    # for its children to go, and nothing in the kernel would reap a bridge it ended.
    children = await run(http, kernel_id, f"import os\nprint(open(f'{CHILDREN}').read().split())")
    assert texts(children) == ["[]"]


async def test_pip_installs_from_an_index_the_profile_names(
    http: httpx.AsyncClient, place: Place
) -> None:
    kernel_id = await kernel(http, "pip-net", place, sandbox="local")
    index = f"http://127.0.0.1:{place.port}/simple/"
    installed = await run(http, kernel_id, f"%pip install --index-url {index} netpkg")
    assert installed["state"] == "completed", texts(installed)
    imported = await run(http, kernel_id, "import netpkg\nprint(netpkg.VERSION)")
    assert texts(imported) == ["1.0"]


async def test_loopback_is_refused_under_the_default_and_the_cell_says_which_rule(
    http: httpx.AsyncClient, place: Place
) -> None:
    kernel_id = await kernel(http, "refused", place)
    fetched = await run(http, kernel_id, FETCH.format(port=place.port))
    assert fetched["state"] == "error"
    assert fetched["sandbox_failure"] == {
        "rule": "network",
        "profile": "workspace",
        "path": f"127.0.0.1:{place.port}",
    }
    # A raw socket has no way out at all: its namespace holds only an empty loopback.
    raw = await run(http, kernel_id, RAW.format(port=place.port))
    assert raw["error"]["value"] == "[Errno 111] Connection refused"
    assert raw["sandbox_failure"] == {"rule": "network", "profile": "workspace", "path": None}
    unrouted = await run(
        http, kernel_id, RAW.format(port=place.port).replace("127.0.0.1", "192.0.2.1")
    )
    assert unrouted["error"]["value"] == "[Errno 101] Network is unreachable"
    assert unrouted["sandbox_failure"] == {"rule": "network", "profile": "workspace", "path": None}


async def test_a_kernel_taken_back_after_a_sigkill_has_its_network_again(place: Place) -> None:
    gateway = gateway_in(place, "state-kill")
    try:
        gateway.start()
        async with client(gateway) as http:
            kernel_id = await kernel(http, "kept", place, sandbox="local")
            assert "hello from loopback" in texts(
                await run(http, kernel_id, FETCH.format(port=place.port))
            )
        gateway.kill()
        gateway.start()
        async with client(gateway) as http:
            again = await run(http, kernel_id, FETCH.format(port=place.port))
            assert again["state"] == "completed" and "hello from loopback" in texts(again)
    finally:
        gateway.stop()


@pytest.fixture
def clone_under_tmp() -> Iterator[Path]:
    """A dir under the host's /tmp holding a copy of the gateway's package, as a clone there
    would (every sandbox replaces that /tmp with its own); removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="loomgate-clone-", dir="/tmp"))
    try:
        source = Path(loomgate.gateway.__file__).parent
        copied = shutil.ignore_patterns("__pycache__")
        shutil.copytree(source, root / "loomgate" / "gateway", ignore=copied)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def test_a_gateway_run_from_under_tmp_gives_its_kernels_their_network(
    place: Place, clone_under_tmp: Path
) -> None:
    # Bytecode written (an empty value turns it on) shows it imports from the copy.
    env = {"PYTHONPATH": str(clone_under_tmp), "PYTHONDONTWRITEBYTECODE": ""}
    env["JUPYTER_PATH"] = str(write_kernel_specs(place.root / "jupyter"))
    gateway = gateway_in(place, "state-tmp-clone", **env)
    try:
        gateway.start()
        assert any((clone_under_tmp / "loomgate/gateway/__pycache__").glob("app.*.pyc"))
        async with client(gateway) as http:
            kernel_id = await kernel(http, "from-tmp", place, sandbox="local")
            listed = (await http.get(f"{KERNELS}/{kernel_id}")).json()["kernel"]["sandbox"]
            assert listed["network"] == [f"127.0.0.1:{place.port}"]  # what its status names
            fetched = await run(http, kernel_id, FETCH.format(port=place.port))
            assert fetched["state"] == "completed" and "hello from loopback" in texts(fetched)
            # A kernel that takes only TCP is reached through the relay inside, run so too.
            bash = await kernel(http, "from-tmp-bash", place, sandbox="local", kernel_spec="bash")
            said = await run(http, bash, "echo relayed")
            assert said["state"] == "completed" and texts(said) == ["relayed"]
    finally:
        gateway.stop()


async def test_under_landlock_alone_the_proxy_holds_as_well(place: Place) -> None:
    gateway = gateway_in(place, "state-landlock", LOOMGATE_SANDBOX_MECHANISM="landlock")
    try:
        gateway.start()
        async with client(gateway) as http:
            named = await kernel(http, "named", place, sandbox="local-held")
            assert (
                "landlock"
                in (await http.get(f"{KERNELS}/{named}")).json()["kernel"]["sandbox"]["mechanism"]
            )
            fetched = await run(http, named, FETCH.format(port=place.port))
            assert fetched["state"] == "completed" and "hello from loopback" in texts(fetched)
            refused = await kernel(http, "refused", place, sandbox="held")
            denied = await run(http, refused, FETCH.format(port=place.port))
            assert denied["sandbox_failure"] == {
                "rule": "network",
                "profile": "held",
                "path": f"127.0.0.1:{place.port}",
            }
            # Landlock lets its TCP reach only the proxy's port: the server itself is refused.
            raw = await run(http, refused, RAW.format(port=place.port))
            assert raw["error"]["value"] == "[Errno 13] Permission denied"
    finally:
        gateway.stop()
