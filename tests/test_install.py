"""From a clone to an MCP host: `uv tool install <clone>` puts the three commands on PATH; the
installed `loomgate` starts a gateway and the installed `loomgate-mcp`, started as a host starts
it, runs a cell in the directory `--cwd` names."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from loomgate.translator.mcp_server.server import TOOLS
from tests.support.gateways import free_port, stop_local_gateway
from tests.support.mcp_clients import text

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = {"loomgate", "loomgate-mcp", "loomgate-gateway"}


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """Install the clone with `uv tool install` into a tool dir of the test's own; return its
    bin dir."""
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed to install the tools"
    bin_dir = tmp_path / "bin"
    env = {**os.environ, "UV_TOOL_DIR": str(tmp_path / "tools"), "UV_TOOL_BIN_DIR": str(bin_dir)}
    installed = subprocess.run(
        [uv, "tool", "install", str(ROOT)], env=env, capture_output=True, text=True, timeout=600
    )
    assert installed.returncode == 0, installed.stderr
    assert {path.name for path in bin_dir.iterdir()} >= COMMANDS
    return bin_dir


@pytest.fixture
def host_env(tools: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The bare environment a host gives its servers, with a gateway the installed `loomgate`
    started on a free port (as the README says to when 8787 is taken); stopped afterwards."""
    (tmp_path / "my project").mkdir()
    env = {
        "PATH": f"{tools}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LOOMGATE_STATE_DIR": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    start = [str(tools / "loomgate"), "gateway", "start", "--port", str(free_port())]
    try:
        started = subprocess.run(start, env=env, capture_output=True, text=True, timeout=120)
        assert started.returncode == 0, started.stderr
        yield env
    finally:
        stop_local_gateway(tmp_path / "state")


async def test_the_installed_server_runs_where_cwd_says(
    tools: Path, host_env: dict[str, str], tmp_path: Path
) -> None:
    project = tmp_path / "my project"
    server = StdioServerParameters(
        command=str(tools / "loomgate-mcp"), args=["--cwd", str(project)], env=host_env
    )
    async with Client(server) as mcp:
        listed = await mcp.list_tools()
        assert [tool.name for tool in listed.tools] == [fn.__name__ for fn in TOOLS]
        result = await mcp.call_tool("run_cell", {"code": "import os; os.getcwd()"})
        assert text(result).split("\n")[-1] == f"Out[1]: {str(project)!r}"
