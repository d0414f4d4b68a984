"""Secrets by allow-list, on a real gateway and real confined kernels (bubblewrap on PATH, the
shipped one, and Landlock alone): what appears in the home dir after a kernel started, and a
hidden file replaced by a rename, stay out of its reach; the person's own files and the listed
dot names stay readable; a dot name no list holds is not readable, and a profile's `readable`
adds one.

The gateway's HOME and config lie under /var/tmp: a confined kernel's /tmp is its own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from tests.support.cells import KERNELS, output_texts, run
from tests.support.gateways import GatewayProcess, client
from tests.support.sandboxed_gateways import GatewayHome, gateway_home

SECRET = "s3cr3t-value"
# Made after the kernel started: each must stay out of its reach.
LATER = (
    ".pgpass",
    ".docker/config.json",
    ".kube/config",
    ".git-credentials",
    ".local/share/jupyter/runtime/jpserver-9.json",
    ".config/loomgate/sandbox.toml",
    ".newtool/credentials",
    ".config/newtool/token",
    ".cache/huggingface/token",
)
READ = """\
import json, pathlib
found = {}
for name in json.loads(%r):
    try:
        found[name] = pathlib.Path.home().joinpath(name).read_text()
    except OSError as e:
        found[name] = type(e).__name__
print(json.dumps(found))
"""


@pytest.fixture(scope="module", params=["bubblewrap", "shipped", "landlock"])
def place(request: pytest.FixtureRequest) -> Iterator[tuple[GatewayHome, str]]:
    """A home with the person's files and secrets, under /var/tmp; removed afterwards."""
    with gateway_home("home-view") as here:
        home = here.home
        for name, text in {
            "projects/data.csv": "a,b\n",
            ".gitconfig": "[user]\n",
            ".netrc": SECRET,
            ".newtool/config": "shown when readable",
            ".cache/huggingface/hub/model": "weights",
        }.items():
            (home / name).parent.mkdir(parents=True, exist_ok=True)
            (home / name).write_text(text)
        (here.config / "loomgate" / "sandbox.toml").write_text(
            # No writable dir: a profile Landlock alone holds too (test_landlock_promises.py).
            'default = "workspace"\n\n[profiles.quiet]\nwritable = []\n\n'
            '[profiles.tool]\nextends = "quiet"\nreadable = ["~/.newtool"]\n'
        )
        yield here, str(request.param)


@pytest.fixture(scope="module")
def gateway(place: tuple[GatewayHome, str]) -> Iterator[GatewayProcess]:
    """A gateway with the fake home, forced to one bubblewrap."""
    here, mechanism = place
    env = {
        "HOME": str(here.home),
        "XDG_CONFIG_HOME": str(here.config),
        "LOOMGATE_SANDBOX_MECHANISM": mechanism,
    }
    started = GatewayProcess(here.root / "state", env=env)
    try:
        yield started.start()
    finally:
        started.stop()


@pytest.fixture
async def http(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for the gateway."""
    async with client(gateway) as c:
        yield c


async def read_in(http: httpx.AsyncClient, kernel: str, names: list[str]) -> dict[str, str]:
    """Return what the kernel reads of each home-relative name (the text, or its error)."""
    execution = await run(http, kernel, READ % json.dumps(names))
    assert execution["state"] == "completed", execution
    found: dict[str, str] = json.loads(output_texts(execution)[-1])
    return found


async def started(http: httpx.AsyncClient, here: GatewayHome, profile: str) -> str:
    """Return the id of a new kernel under `profile`, in the project."""
    r = await http.post(KERNELS, json={"sandbox": profile, "cwd": str(here.project)})
    assert r.status_code == 201, r.text
    kernel_id: str = r.json()["kernel"]["id"]
    return kernel_id


async def test_secrets_made_or_replaced_after_the_start_stay_out_of_reach(
    http: httpx.AsyncClient, place: tuple[GatewayHome, str]
) -> None:
    here, mechanism = place
    home = here.home
    kernel = await started(http, here, "quiet")
    try:
        assert (await http.get(f"{KERNELS}/{kernel}")).json()["kernel"]["sandbox"]["mechanism"]
        made = [home / name for name in LATER]
        for path in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(SECRET)
        # An editor's or git's save: a new file renamed over the hidden one.
        (home / ".netrc.new").write_text(SECRET + " (new)")
        (home / ".netrc.new").replace(home / ".netrc")
        found = await read_in(
            http, kernel, [*LATER, ".netrc", "projects/data.csv", ".gitconfig", ".newtool/config"]
        )
    finally:
        await http.delete(f"{KERNELS}/{kernel}")
        for path in made:
            path.unlink(missing_ok=True)
    for name in (*LATER, ".netrc"):
        assert found[name] in ("FileNotFoundError", "PermissionError"), (name, found[name])
    assert found["projects/data.csv"] == "a,b\n"
    assert found[".gitconfig"] == "[user]\n"
    # A dot name no list holds: not in a bubblewrap kernel's view, unreadable under Landlock
    # alone (whose walk goes around it).
    denied = "FileNotFoundError" if mechanism != "landlock" else "PermissionError"
    assert found[".newtool/config"] == denied


async def test_a_profile_makes_a_name_readable(
    http: httpx.AsyncClient, place: tuple[GatewayHome, str]
) -> None:
    here, _ = place
    kernel = await started(http, here, "tool")
    try:
        found = await read_in(http, kernel, [".newtool/config", ".cache/huggingface/hub/model"])
    finally:
        await http.delete(f"{KERNELS}/{kernel}")
    assert found == {
        ".newtool/config": "shown when readable",
        ".cache/huggingface/hub/model": "weights",
    }
