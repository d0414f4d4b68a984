"""The user's startup.py and inspectors.py, sent as source to each kernel the translator makes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loomgate.shared.paths import config_dir

if TYPE_CHECKING:
    from loomgate.translator.client.gateway import GatewayClient

SETUP_WAIT = 120.0

# Runs in the kernel. Installs an IPython AST transformer that calls each inspector with the
# cell's AST (and source, for two-parameter inspectors) before the cell runs.
INSPECTOR_RUNTIME = r'''
def __loomgate_install_inspectors(namespace, path, source):
    import ast, inspect, sys
    from IPython import get_ipython

    class RuleBlock(Exception):
        """Raised by an inspector to block a cell; only its message is shown."""

    namespace["RuleBlock"] = RuleBlock
    scope = {"RuleBlock": RuleBlock, "__file__": path, "__name__": "loomgate_inspectors"}
    exec(compile(source, path, "exec"), scope)
    found = list(scope.get("inspectors", []))
    if callable(scope.get("inspect")):
        found.insert(0, scope["inspect"])

    class Inspectors(ast.NodeTransformer):
        source = ""

        def visit(self, tree):
            source = self.source
            for check in found:
                try:
                    arity = len(inspect.signature(check).parameters)
                    note = check(tree, source) if arity >= 2 else check(tree)
                except RuleBlock as blocked:
                    message = ast.Constant(str(blocked))
                    call = ast.Call(ast.Name("RuleBlock", ast.Load()), [message], [])
                    body = [ast.Raise(call, ast.Constant(None))]
                    return ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
                except Exception as error:
                    name = getattr(check, "__name__", "inspector")
                    print(f"[inspector {name} failed: {type(error).__name__}: {error}; "
                          "the cell runs]", file=sys.stderr)
                    continue
                if isinstance(note, str) and note:
                    print(f"[note] {note}")
            return tree

    transformer = Inspectors()

    def remember_source(info):
        transformer.source = info.raw_cell

    ip = get_ipython()
    ip.ast_transformers.append(transformer)
    ip.events.register("pre_run_cell", remember_source)
    return len(found)
'''


@dataclass(frozen=True)
class KernelSetup:
    """What runs in a new (or reset) kernel: startup.py, then the inspectors."""

    startup: Path | None
    inspectors: Path | None

    @classmethod
    def from_config(cls, directory: Path | None = None) -> KernelSetup:
        """Return the setup found in the config dir (either file may be absent)."""
        directory = directory or config_dir()
        startup = directory / "startup.py"
        inspectors = directory / "inspectors.py"
        return cls(
            startup if startup.is_file() else None,
            inspectors if inspectors.is_file() else None,
        )

    def cell(self) -> str | None:
        """Return the cell that performs the setup, or None when there is nothing to do."""
        parts: list[str] = []
        if self.startup is not None:
            source = self.startup.read_text(encoding="utf-8")
            path = str(self.startup)
            parts.append(
                f"__file__ = {path!r}\n"
                f"exec(compile({source!r}, {path!r}, 'exec'), globals())\n"
                "del __file__"
            )
        if self.inspectors is not None:
            source = self.inspectors.read_text(encoding="utf-8")
            path = str(self.inspectors)
            parts.append(
                INSPECTOR_RUNTIME
                + f"\n__loomgate_install_inspectors(globals(), {path!r}, {source!r})\n"
                "del __loomgate_install_inspectors"
            )
        return "\n".join(parts) if parts else None

    async def run(self, client: GatewayClient, kernel_id: str) -> str:
        """Run the setup cell on a kernel; return its output text ("" when there is none)."""
        cell = self.cell()
        if cell is None:
            return ""
        response = await client.submit(kernel_id, cell, wait=SETUP_WAIT, head=200, tail=0)
        execution = response["execution"]
        output = execution.get("output")
        lines = [line["text"] for line in output["head"]] if output else []
        error = execution["error"]
        if execution["state"] == "error":
            name, value = (error["name"], error["value"]) if error else (None, None)
            lines.append(f"startup failed: {name}: {value}")
        return "\n".join(lines)
