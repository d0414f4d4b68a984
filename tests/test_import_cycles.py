"""The dependencies inside a package run one way: no module imports, even for type checking or
inside a function, a module that imports it back (directly or round a longer loop)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Each package's source folder and its dotted name.
PACKAGES = {
    "loomgate.gateway": ROOT / "gateway" / "src" / "loomgate" / "gateway",
    "loomgate.shared": ROOT / "shared" / "src" / "loomgate" / "shared",
    "loomgate.translator": ROOT / "translator" / "src" / "loomgate" / "translator",
}


def module_files(package: str, folder: Path) -> dict[str, Path]:
    """Return every module of the package in `folder`, by dotted name."""
    modules: dict[str, Path] = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(folder).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join([package, *parts])] = path
    return modules


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Return the modules of `known` that module `name` (at `path`) imports, wherever in it."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                here = here[: len(here) - (node.level - 1)]
                base = ".".join([*here, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module in known and module != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the import loops of `graph` (module -> modules it imports), each as its members,
    sorted: the strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def import_graph(package: str, folder: Path) -> dict[str, set[str]]:
    """Return which module of the package imports which."""
    modules = module_files(package, folder)
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


@pytest.mark.parametrize(("package", "folder"), PACKAGES.items(), ids=list(PACKAGES))
def test_no_module_imports_one_that_imports_it_back(package: str, folder: Path) -> None:
    graph = import_graph(package, folder)
    assert len(graph) > 1, f"no modules found in {folder}"
    assert not cycles(graph), f"import cycles in {package}: {cycles(graph)}"


def test_a_cycle_through_type_checking_and_relative_imports_is_found(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("from .c import thing\n")
    (package / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\n"
    )
    (package / "d.py").write_text("import pkg.a\n")
    graph = import_graph("pkg", package)
    assert graph["pkg.a"] == {"pkg.sub", "pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.sub.c"}
    assert graph["pkg.sub.c"] == {"pkg.a"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.sub.c"]]
    (package / "sub" / "c.py").write_text("thing = 1\n")
    assert cycles(import_graph("pkg", package)) == []
