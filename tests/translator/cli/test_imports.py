"""`loomgate` starts fast: its modules import none of the heavy packages."""

from __future__ import annotations

from tests.support.imports import imported_modules

CLI_MODULES = ("main", "run", "kernel_commands", "gateway_control", "service", "stream_protocol")
# The MCP SDK and its validation, the HTTP stack the CLI does without, the gateway's own parts.
HEAVY_PACKAGES = {"mcp", "pydantic", "pydantic_core", "httpx", "httpcore", "starlette", "zmq"}
HEAVY_PACKAGES |= {"jupyter_server", "jupyter_client", "tornado", "regex", "jsonschema"}


def test_the_cli_imports_only_what_it_needs() -> None:
    commands = [f"loomgate.translator.cli.{name}" for name in CLI_MODULES]
    modules = imported_modules("-c", "import " + ", ".join(commands))
    assert set(commands) <= modules
    heavy = {name.partition(".")[0] for name in modules} & HEAVY_PACKAGES
    assert heavy == set(), "`loomgate` starts slowly when it imports these"
