"""Finding private attribute uses in a package's source: `obj._name` where obj is not self."""

from __future__ import annotations

import ast
from pathlib import Path

# Public, documented names that begin with an underscore all the same: os._exit (what a forked
# child calls), and namedtuple's own methods.
DOCUMENTED = frozenset({"_exit", "_asdict", "_replace", "_fields", "_make"})


def private_attributes(path: Path) -> set[str]:
    """Return the private attribute names `path` reads on objects other than self and cls."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr not in DOCUMENTED
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            names.add(node.attr)
    return names


def own_private_names(root: Path) -> set[str]:
    """Return the private names a package defines itself: functions, classes, self.X."""
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


def foreign_private_uses(root: Path, allowed_module: str) -> list[str]:
    """Return `file: name` for each foreign private name used outside `allowed_module`."""
    own = own_private_names(root)
    return sorted(
        f"{path.relative_to(root)}: {name}"
        for path in root.rglob("*.py")
        if path.name != allowed_module
        for name in private_attributes(path) - own
    )
