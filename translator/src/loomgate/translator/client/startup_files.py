"""The person's startup.py and inspectors.py, read and sent as source for a kernel's setup:
registered with the gateway, which runs them silently (no cell number) now and after every
restart, each part on its own, in every kernel the translator or the CLI attaches to."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loomgate.shared import wire
from loomgate.shared.paths import config_dir
from loomgate.translator.client.errors import Conflict, Uninspected

if TYPE_CHECKING:
    from loomgate.translator.client.gateway import GatewayClient

STARTUP = "startup.py"
INSPECTORS = "inspectors.py"
# allow (the default): a kernel that cannot run inspectors.py runs uninspected, and says so;
# refuse: such a kernel is refused its setup (the translator then stops one it made).
UNINSPECTED = "LOOMGATE_UNINSPECTED"
SETUP_WAIT = 120.0

# Runs one file's code in the kernel. A failure is reported (not raised): its traceback shows
# the file's own frames, never this runner's, and the next part runs regardless.
PART_RUNNER = r"""
def __loomgate_setup_part(path, source, run):
    import linecache, traceback
    from IPython import get_ipython
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    try:
        run(compile(source, path, "exec"))
    except BaseException as error:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == path]
        text = "".join(traceback.format_exception_only(type(error), error))
        if frames:
            stack = "".join(traceback.format_list(frames))
            text = "Traceback (most recent call last):\n" + stack + text
        get_ipython()._loomgate_setup_failure = text.rstrip("\n")
"""

STARTUP_RUNNER = r"""
def __loomgate_startup(code, path):
    namespace = globals()
    namespace["__file__"] = path
    try:
        exec(code, namespace)
    finally:
        namespace.pop("__file__", None)
"""

# Installs an IPython AST transformer that calls each inspector with the cell's AST (and
# source, for two-parameter inspectors) before the cell runs. Installing again replaces it.
INSPECTOR_RUNTIME = r'''
def __loomgate_install_inspectors(namespace, path, code):
    import ast, inspect, sys
    from IPython import get_ipython

    class RuleBlock(Exception):
        """Raised by an inspector to block a cell; only its message is shown."""

    namespace["RuleBlock"] = RuleBlock
    scope = {"RuleBlock": RuleBlock, "__file__": path, "__name__": "loomgate_inspectors"}
    exec(code, scope)
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
    previous = getattr(ip, "_loomgate_inspectors", None)
    if previous is not None:
        old_transformer, old_hook = previous
        if old_transformer in ip.ast_transformers:
            ip.ast_transformers.remove(old_transformer)
        try:
            ip.events.unregister("pre_run_cell", old_hook)
        except ValueError:
            pass
    ip.ast_transformers.append(transformer)
    ip.events.register("pre_run_cell", remember_source)
    ip._loomgate_inspectors = (transformer, remember_source)
'''


@dataclass(frozen=True)
class StartupFiles:
    """The person's startup files every kernel gets: startup.py, then the inspectors (either may
    be absent), sent as source for IPython kernels; a `startup.EXT` for kernels of another
    language, sent as it is to kernels whose files end in EXT (startup.sh for bash). With
    `required_inspectors`, a kernel that cannot run inspectors.py is refused its setup."""

    startup: Path | None
    inspectors: Path | None
    others: tuple[Path, ...] = ()
    required_inspectors: bool = False

    @classmethod
    def from_config(
        cls, directory: Path | None = None, environ: Mapping[str, str] | None = None
    ) -> StartupFiles:
        """Return the setup found in the config dir (UninspectedSetting when
        LOOMGATE_UNINSPECTED in `environ` is neither allow nor refuse)."""
        directory = directory or config_dir()
        startup = directory / STARTUP
        inspectors = directory / INSPECTORS
        others = sorted(
            path
            for path in directory.glob(f"{Path(STARTUP).stem}.*")
            if path.suffix and path.name != STARTUP and path.is_file()
        )
        return cls(
            startup if startup.is_file() else None,
            inspectors if inspectors.is_file() else None,
            tuple(others),
            uninspected_refused(os.environ if environ is None else environ),
        )

    def parts(self) -> list[wire.SetupPart]:
        """Return the setup parts, one per file, each running its file as source."""
        parts: list[wire.SetupPart] = []
        if self.startup is not None:
            path = repr(str(self.startup))
            call = f"__loomgate_startup(code, {path})"
            parts.append(file_part(STARTUP, self.startup, STARTUP_RUNNER, call))
        if self.inspectors is not None:
            path = repr(str(self.inspectors))
            call = f"__loomgate_install_inspectors(globals(), {path}, code)"
            part = file_part(INSPECTORS, self.inspectors, INSPECTOR_RUNTIME, call)
            if self.required_inspectors:
                part["required"] = True
            parts.append(part)
        for other in self.others:
            code = other.read_text(encoding="utf-8")
            parts.append(wire.SetupPart(name=other.name, code=code, runs_in=other.suffix))
        return parts

    def inspectors_only(self) -> StartupFiles:
        """Return the setup for a kernel someone else made (a notebook's): startup files are
        theirs to choose, the inspectors guard every cell the agent runs there."""
        return StartupFiles(None, self.inspectors, (), self.required_inspectors)

    async def install(self, client: GatewayClient, kernel_id: str) -> wire.SetupReply | None:
        """Register this setup as the kernel's (it runs now unless it already ran there
        unchanged); return the gateway's answer, or None when there is nothing to set up (a
        setup someone else registered stays)."""
        parts = self.parts()
        if not parts:
            return None
        try:
            return await client.setup(kernel_id, parts, wait=SETUP_WAIT)
        except Conflict as refused:
            if not self.required_inspectors:
                raise
            raise Uninspected(refused.message, status=refused.status) from None


def is_theirs(kernel: wire.Kernel, mode: wire.GatewayMode) -> bool:
    """Return whether `kernel` is someone else's: a kernel of a person's Jupyter (the gateway is
    an extension there), or one started on an upstream by someone else and attached."""
    return mode == "extension" or kernel["attached"] is not None


def file_part(name: str, path: Path, runtime: str, call: str) -> wire.SetupPart:
    """Return the part that defines `runtime` and runs `path`'s source through `call` (an
    expression of `code`), then removes the names it defined."""
    source = path.read_text(encoding="utf-8")
    helper = call.partition("(")[0]
    code = (
        f"{PART_RUNNER}{runtime}__loomgate_setup_part({str(path)!r}, {source!r}, "
        f"lambda code: {call})\ndel __loomgate_setup_part, {helper}\n"
    )
    return wire.SetupPart(name=name, code=code)


class UninspectedSetting(ValueError):
    """LOOMGATE_UNINSPECTED names neither allow nor refuse."""


def uninspected_refused(environ: Mapping[str, str]) -> bool:
    """Return whether LOOMGATE_UNINSPECTED refuses kernels that cannot run inspectors.py."""
    value = environ.get(UNINSPECTED, "allow").strip().lower() or "allow"
    if value not in ("allow", "refuse"):
        raise UninspectedSetting(f"{UNINSPECTED} must be allow or refuse, not {value!r}")
    return value == "refuse"
