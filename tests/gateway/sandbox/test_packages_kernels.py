"""`%pip install` and `!pip install` in real kernels on a real gateway, under the default profile
(workspace), strict and none: a local wheel installs into the kernel's own packages dir (never
the gateway's environment), imports at once, survives a reset and a gateway restart that takes
the kernel back, and goes when the kernel is stopped; without network a name fails at once; a
kernel spec whose Python has no pip is lent the gateway's.

Everything lies under /var/tmp: a confined kernel's /tmp is its own.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cells import KERNELS, output_texts, run
from tests.support.gateways import GatewayProcess, client
from tests.support.sandboxed_gateways import SHIPPED_DEFAULT, sandbox_root

NO_PIP_SPEC = "nopip"  # a kernel spec whose Python (a venv made without pip) has none
FAST = 20.0  # seconds: pip with no index fails in about one; five retries take far longer


def wheel(directory: Path, name: str, version: str = "1.0") -> Path:
    """Write a pure-Python wheel of module `name` (printing `version` from its `where`
    console script) into `directory` and return its path; no build backend involved."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": f"VERSION = {version!r}\n\ndef main():\n    print('{name} {version}')\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: loomgate-tests\nRoot-Is-Purelib: true\n"
            "Tag: py3-none-any\n"
        ),
        f"{info}/entry_points.txt": f"[console_scripts]\n{name}-where = {name}:main\n",
    }
    path = directory / f"{name}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            data = text.encode()
            archive.writestr(member, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{member},sha256={digest.decode()},{len(data)}")
        archive.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,", ""]))
    return path


@dataclass
class Place:
    """A gateway under the shipped default profile, its root under /var/tmp, and wheels."""

    gateway: GatewayProcess
    root: Path

    @property
    def project(self) -> Path:
        """Return the kernels' working directory."""
        return self.root / "project"

    @property
    def wheels(self) -> Path:
        """Return the dir the tests' wheels lie in (readable under every profile)."""
        return self.root / "wheels"


def python_without_pip(root: Path) -> Path:
    """Return the interpreter of a venv made without pip that imports the gateway's other
    packages (ipykernel among them) through a site dir of links to them."""
    links = root / "site-without-pip"
    links.mkdir()
    purelib = Path(sysconfig.get_paths()["purelib"])
    for entry in purelib.iterdir():
        if not entry.name.startswith("pip"):
            (links / entry.name).symlink_to(entry)
    venv = root / "nopip"
    base = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = (venv / "lib").glob("python3.*/site-packages")
    (site / "links.pth").write_text(f"import site; site.addsitedir({str(links)!r})\n")
    return venv / "bin" / "python"


def kernel_spec(root: Path, python: Path) -> Path:
    """Write kernel spec NO_PIP_SPEC running `python` into a Jupyter data dir; return the dir."""
    data = root / "jupyter"
    spec = data / "kernels" / NO_PIP_SPEC
    spec.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "no pip", "language": "python"})
    )
    return data


@pytest.fixture(scope="module")
def place() -> Iterator[Place]:
    """A gateway with the shipped default profile and a kernel spec without pip."""
    with sandbox_root() as root:
        (root / "wheels").mkdir()
        data = kernel_spec(root, python_without_pip(root))
        env = {"XDG_CONFIG_HOME": str(root / "config"), "JUPYTER_PATH": str(data)}
        (root / "config" / "loomgate" / "sandbox.toml").write_text(
            f'default = "{SHIPPED_DEFAULT}"\n'
        )
        gateway = GatewayProcess(root / "state", env=env)
        try:
            gateway.start()
            yield Place(gateway, root)
        finally:
            gateway.stop()


@pytest.fixture
async def http(place: Place) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for the module's gateway."""
    async with client(place.gateway) as c:
        yield c


async def start(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """Start a kernel as `body` asks and return it."""
    r = await http.post(KERNELS, json=body)
    assert r.status_code == 201, r.text
    kernel: dict[str, Any] = r.json()["kernel"]
    return kernel


async def printed(http: httpx.AsyncClient, kernel: str, code: str) -> list[str]:
    """Run `code` and return the lines it printed (failing on an error)."""
    execution = await run(http, kernel, code)
    assert execution["state"] == "completed", execution
    return output_texts(execution)


def installed(shown: list[str], name: str, version: str = "1.0") -> bool:
    """Return whether pip's output says it installed `name` (as pip spells it) at `version`."""
    spelled = name.replace("_", "-")
    return any(f"Successfully installed {spelled}-{version}" in line for line in shown)


def is_dir(path: Path) -> bool:
    """Return whether `path` is a dir here, on the host."""
    return path.is_dir()


def gateway_site_packages() -> Path:
    """Return the site-packages of the environment the gateway runs from (this one's)."""
    return Path(sysconfig.get_paths()["purelib"])


def not_in_the_gateways_environment(name: str) -> None:
    """Assert that nothing of package `name` went into the gateway's environment."""
    site = gateway_site_packages()
    assert not (site / f"{name}.py").exists()
    assert not list(site.glob(f"{name}-*.dist-info"))
    assert not (Path(sys.prefix) / "bin" / f"{name}-where").exists()


@pytest.mark.parametrize("profile", ["workspace", "strict", "none"])
async def test_pip_installs_a_local_wheel_into_the_kernels_own_dir(
    http: httpx.AsyncClient, place: Place, profile: str
) -> None:
    first = wheel(place.wheels, f"percent_{profile}")
    second = wheel(place.wheels, f"bang_{profile}")
    kernel = await start(http, {"sandbox": profile, "cwd": str(place.project)})
    kid = kernel["id"]
    packages = Path(kernel["sandbox"]["packages"])
    try:
        assert kernel["sandbox"]["profile"] == profile
        assert is_dir(packages)
        # %pip: IPython's magic runs `sys.executable -m pip`; !pip: the `pip` on PATH.
        shown = await printed(http, kid, f"%pip install {first}")
        assert installed(shown, f"percent_{profile}"), shown
        assert not any("WARNING" in t for t in shown), shown
        where = f"import percent_{profile} as m; print(m.__file__)"
        assert await printed(http, kid, where) == [str(packages / f"percent_{profile}.py")]
        shown = await printed(http, kid, f"!pip install {second}")
        assert installed(shown, f"bang_{profile}"), shown
        assert await printed(
            http, kid, f"import bang_{profile}; print(bang_{profile}.VERSION)"
        ) == ["1.0"]
        # Its console script is on the kernel's PATH; the kernel's Python is the gateway's.
        assert await printed(http, kid, f"!bang_{profile}-where") == [f"bang_{profile} 1.0"]
        prefix = await printed(http, kid, "import sys; print(sys.prefix)")
        assert prefix == [sys.prefix]
        for name in (f"percent_{profile}", f"bang_{profile}"):
            not_in_the_gateways_environment(name)
        # A reinstall of a newer version replaces the code, without pip's warning.
        newer = wheel(place.wheels, f"bang_{profile}", "2.0")
        shown = await printed(http, kid, f"%pip install -q {newer}")
        assert not any("already exists" in t for t in shown), shown
        # A reset starts a new process: what pip installed is still there, first on sys.path.
        r = await http.post(f"{KERNELS}/{kid}/reset")
        assert r.status_code == 200, r.text
        both = f"import percent_{profile}, bang_{profile}; print(bang_{profile}.VERSION)"
        assert await printed(http, kid, both) == ["2.0"]
        before = (
            f"import os, sys; i = sys.path.index({str(packages)!r}); "
            "print([p for p in sys.path[:i] if p not in ('', os.getcwd())])"
        )
        assert await printed(http, kid, before) == ["[]"]  # at most the working dir before it
    finally:
        stopped = await http.delete(f"{KERNELS}/{kid}")
    assert stopped.status_code == 200, stopped.text
    assert not is_dir(packages)


async def test_without_network_a_name_fails_at_once_and_says_so(
    http: httpx.AsyncClient, place: Place
) -> None:
    kernel = await start(http, {"sandbox": "strict", "cwd": str(place.project)})
    try:
        execution = await run(http, kernel["id"], "%pip install loomgate-no-such-package")
        shown = "\n".join(output_texts(execution))
        assert "No matching distribution found for loomgate-no-such-package" in shown, shown
        assert "Retrying" not in shown, shown  # no index asked: PIP_NO_INDEX
        assert execution["elapsed"] < FAST, execution["elapsed"]
        env = await printed(http, kernel["id"], "import os; print(os.environ['PIP_NO_INDEX'])")
        assert env == ["1"]
    finally:
        await http.delete(f"{KERNELS}/{kernel['id']}")


async def test_a_kernel_whose_python_has_no_pip_is_lent_the_gateways(
    http: httpx.AsyncClient, place: Place
) -> None:
    lent = wheel(place.wheels, "lent_pip")
    kernel = await start(http, {"kernel_spec": NO_PIP_SPEC, "cwd": str(place.project)})
    kid = kernel["id"]
    packages = Path(kernel["sandbox"]["packages"])
    try:
        assert kernel["sandbox"]["profile"] == "workspace"
        prefix = await printed(http, kid, "import sys; print(sys.prefix)")
        assert prefix == [str(place.root / "nopip")]
        shown = await printed(http, kid, f"%pip install {lent}")
        assert installed(shown, "lent_pip"), shown
        assert await printed(http, kid, "import lent_pip; print(lent_pip.__file__)") == [
            str(packages / "lent_pip.py")
        ]
        # `!pip` is the kernel's own Python running the lent pip (pip names where it lies).
        version = await printed(http, kid, "!pip --version")
        assert f" from {packages / '.loomgate' / 'lent' / 'pip'} " in version[0], version
    finally:
        await http.delete(f"{KERNELS}/{kid}")


async def test_a_jupyter_api_kernel_unconfined_installs_as_it_always_did(
    http: httpx.AsyncClient, place: Place
) -> None:
    r = await http.post("/api/kernels", json={"name": "python3"})
    assert r.status_code == 201, r.text
    kid = r.json()["id"]
    try:
        kernel = (await http.get(f"{KERNELS}/{kid}")).json()["kernel"]
        assert kernel["sandbox"]["profile"] == "none"
        assert kernel["sandbox"]["packages"] is None
        target = await printed(http, kid, "import os; print(os.environ.get('PIP_TARGET'))")
        assert target == ["None"]
    finally:
        await http.delete(f"/api/kernels/{kid}")


@pytest.fixture
def root() -> Iterator[Path]:
    """A directory under /var/tmp for a gateway of a test's own."""
    with sandbox_root() as path:
        yield path


@pytest.mark.parametrize("profile", [SHIPPED_DEFAULT, "none"])
async def test_the_packages_dir_outlives_a_gateway_sigkill(root: Path, profile: str) -> None:
    (root / "config" / "loomgate" / "sandbox.toml").write_text(f'default = "{profile}"\n')
    before, after = wheel(root, "before_kill"), wheel(root, "after_kill")
    gateway = GatewayProcess(root / "state", env={"XDG_CONFIG_HOME": str(root / "config")})
    try:
        gateway.start()
        async with client(gateway) as http:
            kernel = await start(http, {"name": "kept", "cwd": str(root / "project")})
            assert kernel["sandbox"]["profile"] == profile
            packages = Path(kernel["sandbox"]["packages"])
            await printed(http, "kept", f"%pip install -q {before}")
        gateway.kill()
        gateway.start()
        async with client(gateway) as http:
            taken_back = (await http.get(f"{KERNELS}/kept")).json()["kernel"]
            assert taken_back["sandbox"]["packages"] == str(packages)
            await printed(http, "kept", f"!pip install -q {after}")
            # A restart of a kernel taken back starts under the same packages dir.
            r = await http.post(f"{KERNELS}/kept/reset")
            assert r.status_code == 200, r.text
            both = "import before_kill, after_kill; print(after_kill.__file__)"
            assert await printed(http, "kept", both) == [str(packages / "after_kill.py")]
            stopped = await http.delete(f"{KERNELS}/kept")
            assert stopped.status_code == 200, stopped.text
        assert not is_dir(packages)
    finally:
        gateway.stop()
