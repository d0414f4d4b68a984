"""The private `mcp` SDK names the translator uses: still there, still what loomgate needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.lowlevel import Server

from loomgate.translator.mcp_server import sdk_internals
from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.privates import foreign_private_uses

TRANSLATOR = Path(sdk_internals.__file__).parent.parent


@pytest.mark.parametrize(("name", "why"), sdk_internals.PRIVATE_USES, ids=lambda v: str(v)[:20])
def test_private_name_still_exists(name: str, why: str) -> None:
    server = build_server(Settings(cwd="", env={}))
    assert hasattr(server, name), f"MCPServer.{name} is gone; loomgate used it because {why}"


def test_the_lowlevel_server_runs_on_given_streams() -> None:
    lowlevel = sdk_internals.lowlevel_server(build_server(Settings(cwd="", env={})))
    assert isinstance(lowlevel, Server)
    assert callable(lowlevel.run) and callable(lowlevel.create_initialization_options)


def test_no_other_module_reaches_into_library_privates() -> None:
    offenders = foreign_private_uses(TRANSLATOR, "sdk_internals.py")
    assert not offenders, offenders
