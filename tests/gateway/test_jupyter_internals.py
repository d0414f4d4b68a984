"""The jupyter_client/jupyter_server private names the gateway uses: still there, still used."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from loomgate.gateway.jupyter_internals import PRIVATE_USES, HookedKernelManager, PrivateUse

GATEWAY = Path(inspect.getfile(HookedKernelManager)).parent


@pytest.mark.parametrize("use", PRIVATE_USES, ids=lambda use: use.name)
def test_private_name_still_exists(use: PrivateUse) -> None:
    assert callable(getattr(use.owner, use.name, None)), (
        f"{use.owner.__module__}.{use.owner.__qualname__}.{use.name} is gone; loomgate used it "
        f"because {use.why}"
    )


@pytest.mark.parametrize(
    ("caller", "callee"),
    [
        ("_async_start_kernel", "_async_post_start_kernel"),
        ("_async_restart_kernel", "_async_post_start_kernel"),
        ("_async_restart_kernel", "_async_shutdown_kernel"),
    ],
)
def test_jupyter_client_still_reaches_the_hooks_through_them(caller: str, callee: str) -> None:
    # restart_kernel starts the new process through _async_start_kernel.
    source = inspect.getsource(getattr(KernelManager, caller))
    reached = {callee, "_async_start_kernel"} if caller == "_async_restart_kernel" else {callee}
    assert any(f"self.{name}(" in source for name in reached), f"{caller} no longer calls {callee}"


def private_attributes(path: Path) -> set[str]:
    """Return the private attribute names that `path` reads on objects other than self."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            names.add(node.attr)
    return names


def own_private_names(root: Path) -> set[str]:
    """Return the private names loomgate's own code defines: functions, classes, self.X."""
    names: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                names.add(node.attr)
    return names


def test_no_other_module_reaches_into_jupyter_privates() -> None:
    own = own_private_names(GATEWAY)
    offenders = {
        f"{path.relative_to(GATEWAY)}: {name}"
        for path in GATEWAY.rglob("*.py")
        if path.name != "jupyter_internals.py"
        for name in private_attributes(path) - own
    }
    assert not offenders, sorted(offenders)
