"""startup.py and inspectors.py: each kernel's setup, run silently (no cell number), shown once,
run again after a reset or a death, installed in kernels made elsewhere; inspectors that hold
even when startup.py fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loomgate.translator.mcp_server.settings import Settings
from tests.support.mcp_clients import conversation, text

STARTUP = "greeting = 'hello'\nprint('startup ran from', __file__)\n"

INSPECTORS = """
import ast

def inspect(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "os" for a in node.names):
            raise RuleBlock("importing os is not allowed here")

def fine_note(tree, source):
    return "looks fine" if "fine" in source else None

def broken(tree):
    raise ValueError("inspector bug")

inspectors = [fine_note, broken]
"""


async def test_startup_runs_once_and_after_reset(connect_client: Any, config_dir: Path) -> None:
    (config_dir / "startup.py").write_text(STARTUP)
    async with conversation(connect_client) as mcp:
        first = await mcp.call_tool("run_cell", {"code": "greeting"})
        assert text(first).startswith(
            f"startup.py output:\nstartup ran from {config_dir / 'startup.py'}"
        )
        assert text(first).endswith("Out[1]: 'hello'")
        second = await mcp.call_tool("run_cell", {"code": "greeting * 2"})
        assert "startup.py" not in text(second)
        reset = await mcp.call_tool("reset", {})
        assert "startup ran from" in text(reset)
        again = await mcp.call_tool("run_cell", {"code": "greeting"})
        assert text(again).endswith("Out[3]: 'hello'")


async def test_quiet_hides_startup_output(
    connect_client: Any, settings: Settings, config_dir: Path
) -> None:
    (config_dir / "startup.py").write_text(STARTUP)
    quiet = Settings(**{**settings.__dict__, "quiet": True})
    async with conversation(lambda: connect_client(settings=quiet)) as mcp:
        result = await mcp.call_tool("run_cell", {"code": "greeting"})
        assert "startup" not in text(result)
        assert text(result).endswith("'hello'")


async def test_inspectors_note_block_and_survive_bugs(
    connect_client: Any, config_dir: Path
) -> None:
    (config_dir / "inspectors.py").write_text(INSPECTORS)
    async with conversation(connect_client) as mcp:
        blocked = await mcp.call_tool("run_cell", {"code": "import os\nprint('ran')"})
        body = text(blocked)
        assert blocked.structured_content["state"] == "error"
        assert "RuleBlock: importing os is not allowed here" in body
        assert "ran" not in body.split("\n")
        for internal in ("NodeTransformer", "ast_transformers", "inspectors.py", "visit"):
            assert internal not in body, internal
        noted = await mcp.call_tool("run_cell", {"code": "status = 'fine'\nprint(status)"})
        lines = text(noted).split("\n")
        assert lines[1] == "[note] looks fine"
        assert "fine" in lines  # stdout and stderr interleave in IOPub order
        assert any("[inspector broken failed: ValueError: inspector bug" in x for x in lines)


EXAMPLE_INSPECTORS = Path(__file__).resolve().parents[3] / "examples" / "inspectors.py"


async def test_the_example_inspectors_file_works(connect_client: Any, config_dir: Path) -> None:
    (config_dir / "inspectors.py").write_text(EXAMPLE_INSPECTORS.read_text())
    async with conversation(connect_client) as mcp:
        blocked = await mcp.call_tool("run_cell", {"code": "import shutil\nshutil.rmtree('/x')"})
        assert "RuleBlock: shutil.rmtree is blocked here" in text(blocked)
        noted = await mcp.call_tool("run_cell", {"code": "while True:\n    break"})
        assert "[note] this cell loops for ever" in text(noted)


FAILING_STARTUP = "x = 1\nimport numpy_that_is_not_installed\n"


async def test_a_failing_startup_never_turns_inspectors_off(
    connect_client: Any, config_dir: Path
) -> None:
    (config_dir / "startup.py").write_text(FAILING_STARTUP)
    (config_dir / "inspectors.py").write_text(EXAMPLE_INSPECTORS.read_text())
    path = config_dir / "startup.py"
    async with conversation(connect_client) as mcp:
        blocked = await mcp.call_tool("run_cell", {"code": "import shutil\nshutil.rmtree('/x')"})
        assert text(blocked).split("\n")[:5] == [
            "startup.py failed; the kernel is usable without it:",
            "Traceback (most recent call last):",
            f'  File "{path}", line 2, in <module>',
            "    import numpy_that_is_not_installed",
            "ModuleNotFoundError: No module named 'numpy_that_is_not_installed'",
        ]
        assert "compile(" not in text(blocked)
        assert "RuleBlock: shutil.rmtree is blocked here" in text(blocked)
        assert blocked.structured_content["execution"] == 1
        again = await mcp.call_tool("run_cell", {"code": "x"})  # the failure is shown once
        assert text(again).split("\n")[0].startswith("In [2] (")
        await mcp.call_tool("reset", {})
        dead = await mcp.call_tool(
            "run_cell", {"code": "import os\nprint('bye', flush=True)\nos._exit(1)"}
        )
        assert dead.structured_content["state"] == "died"
        for _ in range(2):  # after a reset, and after a death and its restart
            blocked = await mcp.call_tool(
                "run_cell", {"code": "import shutil\nshutil.rmtree('/x')"}
            )
            assert "RuleBlock: shutil.rmtree is blocked here" in text(blocked)


async def test_a_kernel_made_elsewhere_gets_the_setup_on_connect(
    connect_client: Any, config_dir: Path, http: Any
) -> None:
    (config_dir / "inspectors.py").write_text(EXAMPLE_INSPECTORS.read_text())
    r = await http.post("/api/kernels", json={"name": "python3"})  # a stock Jupyter client
    made_elsewhere = r.json()["id"]
    try:
        async with connect_client() as mcp:
            connected = await mcp.call_tool("connect", {"kernel": made_elsewhere[:8]})
            assert text(connected).split("\n")[1] == (
                "Installed inspectors.py in this kernel; it runs again after every restart."
            )
            blocked = await mcp.call_tool(
                "run_cell", {"code": "import shutil\nshutil.rmtree('/x')"}
            )
            assert "RuleBlock: shutil.rmtree is blocked here" in text(blocked)
            again = await mcp.call_tool("connect", {"kernel": made_elsewhere[:8]})
            assert "inspectors.py" not in text(again)  # already set up: nothing ran again
    finally:
        await http.delete(f"/api/kernels/{made_elsewhere}")
