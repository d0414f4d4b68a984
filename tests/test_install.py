"""From a clone to an MCP host: `uv tool install <clone>`, and `pip install <clone>` into a fresh
virtual environment, each put the three commands on PATH; the installed `loomgate` starts a
gateway and the installed `loomgate-mcp`, started as a host starts it, runs a cell in the
directory `--cwd` names. In the pip install, Jupyter's own `jupyter server extension` commands
list, enable and disable loomgate's extension, which the package ships disabled."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters

from loomgate.translator.mcp_server.server import TOOLS
from tests.support.gateways import free_port, stop_local_gateway
from tests.support.jupyter_lab import start_server, terminate
from tests.support.mcp_clients import text

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {"loomgate", "loomgate-mcp", "loomgate-gateway"}
INSTALL_TIMEOUT = 900
SHIPPED = Path("etc/jupyter/jupyter_server_config.d/loomgate.gateway.json")
# Where the wheels pip resolves from are kept between runs (a first run downloads them).
WHEELHOUSE_DIR = Path(
    os.environ.get("LOOMGATE_TEST_WHEELHOUSE") or Path.home() / ".cache" / "loomgate-tests"
)


def run(command: list[str], env: dict[str, str] | None = None) -> str:
    """Return the output of `command` (stdout, then stderr), which must succeed."""
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, f"{command}: {done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """Install the clone with `uv tool install` into a tool dir of the test's own; return its
    bin dir."""
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed to install the tools"
    bin_dir = tmp_path / "bin"
    env = {**os.environ, "UV_TOOL_DIR": str(tmp_path / "tools"), "UV_TOOL_BIN_DIR": str(bin_dir)}
    run([uv, "tool", "install", str(ROOT)], env)
    assert {path.name for path in bin_dir.iterdir()} >= COMMANDS
    return bin_dir


def wheelhouse(pip: list[str]) -> Path:
    """Return a dir of wheels for the clone's dependencies and its build backend, downloaded
    by pip from the package index on first use (kept for as long as the root's dependencies
    and build requirements stay the same)."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    key = hashlib.sha256(f"{sys.version_info[:2]}{pyproject}".encode()).hexdigest()[:12]
    found = WHEELHOUSE_DIR / f"wheels-{key}"
    if not found.is_dir():
        partial = found.with_name(found.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        run([*pip, "download", "--quiet", "--dest", str(partial), str(ROOT), "hatchling>=1.27"])
        partial.rename(found)
    return found


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Return a fresh virtual environment into which pip installed the clone in one command,
    resolving every dependency (from the kept wheels, no index needed after the first run)."""
    venv = tmp_path_factory.mktemp("pip") / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    wheels = wheelhouse(pip)
    # --no-compile: pip's bytecode compilation of every installed file is most of its time.
    run([*pip, "install", "--quiet", "--no-compile", "--no-index", "--find-links", str(wheels),
         str(ROOT)])  # fmt: skip
    assert {path.name for path in (venv / "bin").iterdir()} >= COMMANDS
    return venv


def host_environment(bin_dir: Path, home: Path) -> dict[str, str]:
    """Return the bare environment a host gives its servers, with `bin_dir` on PATH."""
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(home),
        "LOOMGATE_STATE_DIR": str(home / "state"),
        "XDG_CONFIG_HOME": str(home / "config"),
    }


@pytest.fixture(params=["uv tool install", "pip install"])
def installed(request: pytest.FixtureRequest) -> Path:
    """Return the bin dir of the clone installed one way or the other."""
    if request.param == "uv tool install":
        tools: Path = request.getfixturevalue("tools")
        return tools
    venv: Path = request.getfixturevalue("pip_venv")
    return venv / "bin"


@pytest.fixture
def host_env(installed: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The bare environment a host gives its servers, with a gateway the installed `loomgate`
    started on a free port (as the README says to when 8787 is taken); stopped afterwards."""
    (tmp_path / "my project").mkdir()
    env = host_environment(installed, tmp_path)
    start = [str(installed / "loomgate"), "gateway", "start", "--port", str(free_port())]
    try:
        started = subprocess.run(start, env=env, capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr
        yield env
    finally:
        stop_local_gateway(tmp_path / "state")


async def test_the_installed_server_runs_where_cwd_says(
    installed: Path, host_env: dict[str, str], tmp_path: Path
) -> None:
    project = tmp_path / "my project"
    server = StdioServerParameters(
        command=str(installed / "loomgate-mcp"), args=["--cwd", str(project)], env=host_env
    )
    async with Client(server) as mcp:
        listed = await mcp.list_tools()
        assert [tool.name for tool in listed.tools] == [fn.__name__ for fn in TOOLS]
        result = await mcp.call_tool("run_cell", {"code": "import os; os.getcwd()"})
        assert text(result).split("\n")[-1] == f"Out[1]: {str(project)!r}"


def listed_state(venv: Path) -> bool:
    """Return whether the pip install's environment config lists the extension enabled."""
    extensions = json.loads((venv / SHIPPED).read_text())["ServerApp"]["jpserver_extensions"]
    state: bool = extensions["loomgate.gateway"]
    return state


def serves_loomgate(venv: Path, env: dict[str, str], home: Path) -> bool:
    """Return whether a `jupyter server` of the pip install answers loomgate's endpoints."""
    port, token = free_port(), "install-test-token"
    command = [
        str(venv / "bin" / "jupyter-server"),
        f"--port={port}",
        "--ServerApp.port_retries=0",
        "--ServerApp.ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={home}",
        "--ServerApp.allow_root=True",
        "--no-browser",
    ]
    headers = {"Authorization": f"token {token}"}
    url = f"http://127.0.0.1:{port}"
    process = start_server(
        command, env, home / "jupyter.log", ready_url=f"{url}/api/status", headers=headers,
        label="jupyter server",
    )  # fmt: skip
    try:
        return httpx.get(f"{url}/api/loomgate/info", headers=headers).status_code == 200
    finally:
        terminate(process, set(), "jupyter server")


def test_jupyters_own_commands_enable_and_disable_the_shipped_extension(
    pip_venv: Path, tmp_path: Path
) -> None:
    env = {
        **host_environment(pip_venv / "bin", tmp_path),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
    }
    jupyter = [str(pip_venv / "bin" / "jupyter"), "server", "extension"]
    assert listed_state(pip_venv) is False  # shipped, disabled
    listing = strip_colour(run([*jupyter, "list"], env))
    assert "loomgate.gateway disabled" in listing
    assert re.search(r"loomgate\.gateway (0\.1\.0 )? ?OK", listing)  # validated: importable
    assert not serves_loomgate(pip_venv, env, tmp_path)

    run([*jupyter, "enable", "loomgate.gateway"], env)  # Jupyter's default: this environment
    assert listed_state(pip_venv) is True
    assert "loomgate.gateway enabled" in strip_colour(run([*jupyter, "list"], env))
    assert serves_loomgate(pip_venv, env, tmp_path)
    status = run([str(pip_venv / "bin" / "loomgate"), "jupyter", "status"], env)
    assert status.startswith(f"loomgate's Jupyter server extension: enabled ({pip_venv / SHIPPED})")

    run([*jupyter, "disable", "loomgate.gateway"], env)
    assert listed_state(pip_venv) is False
    assert not serves_loomgate(pip_venv, env, tmp_path)

    # The friendly path: the person's config, and the environment's, which Jupyter reads first
    # in a virtual environment.
    said = run([str(pip_venv / "bin" / "loomgate"), "jupyter", "enable"], env)
    person = tmp_path / "jupyter-config" / "jupyter_server_config.d" / "loomgate.gateway.json"
    assert said.splitlines()[0] == (
        f"loomgate's Jupyter server extension is enabled in {pip_venv / SHIPPED} and {person}."
    )
    assert listed_state(pip_venv) is True
    assert serves_loomgate(pip_venv, env, tmp_path)
    run([str(pip_venv / "bin" / "loomgate"), "jupyter", "disable"], env)
    assert listed_state(pip_venv) is False
    run([*jupyter, "enable", "--user", "loomgate.gateway"], env)  # it is listed: this works too
    assert json.loads(person.read_text())["ServerApp"]["jpserver_extensions"] == {
        "loomgate.gateway": True
    }


def strip_colour(output: str) -> str:
    """Return `output` without its terminal colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", output)
