"""docs/architecture.md against the tree: every product module is on the map, and the map names
no module that is not there.

A module is named by its path relative to its package root, with or without `.py`
(`kernels/registry.py`, `gateway/records/record.py`; a module at the package root with its
package: `gateway/app.py`, `translator/output_view.py`, `shared/wire.py`), anywhere in the doc;
or, in the diagram, by its bare stem (`registry`, `extension.py`) when no other product module
has that stem: a stem two modules share (`channels`, `executions`) says which one only by its
path.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = {
    "gateway": ROOT / "gateway" / "src" / "loomgate" / "gateway",
    "translator": ROOT / "translator" / "src" / "loomgate" / "translator",
    "shared": ROOT / "shared" / "src" / "loomgate" / "shared",
}
NOT_MODULES = {"__init__.py", "__main__.py"}
# A name stands alone: no letter, digit, `_`, `-`, `.` or `/` glued to either side.
EDGE_BEFORE = r"(?<![\w./-])"
EDGE_AFTER = r"(?![\w/-]|\.\w)"
# A mention of a Python file: a path or a bare file name ending in .py.
PY_MENTION = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.py)(?!\w)")
DIAGRAM = re.compile(r"^```\n(.*?)^```", re.DOTALL | re.MULTILINE)
# Files of the person's that the doc mentions (the kernel setup they write), not of the repo.
PERSONS_FILES = {"startup.py", "inspectors.py"}


def product_modules() -> dict[str, str]:
    """Return each product module's path as the doc names it (`kernels/registry.py`, or
    `gateway/app.py` at a package root), mapped to its stem."""
    modules = {}
    for package, root in PACKAGES.items():
        for path in sorted(root.rglob("*.py")):
            if path.name in NOT_MODULES:
                continue
            relative = path.relative_to(root).as_posix()
            key = relative if "/" in relative else f"{package}/{relative}"
            modules[key] = path.stem
    return modules


def diagram(doc: str) -> str:
    """Return the text of the doc's diagram (its first fenced block)."""
    found = DIAGRAM.search(doc)
    assert found, f"{DOC.name} has no diagram (a fenced block)"
    return found.group(1)


def named(path: str, stem: str, doc: str, unique: bool) -> bool:
    """Return whether `doc` names the module at `path`: by its path anywhere, or by its bare
    stem in the diagram when the stem is `unique` among product modules."""
    by_path = re.compile(r"(?<![\w.-])" + re.escape(path.removesuffix(".py")) + r"(\.py)?(?![\w/])")
    if by_path.search(doc):
        return True
    if not unique:
        return False
    by_stem = re.compile(EDGE_BEFORE + re.escape(stem) + r"(\.py)?" + EDGE_AFTER)
    return by_stem.search(diagram(doc)) is not None


def missing_modules(doc: str) -> list[str]:
    """Return the product modules `doc` does not name."""
    modules = product_modules()
    stems = Counter(modules.values())
    return [path for path, stem in modules.items() if not named(path, stem, doc, stems[stem] == 1)]


@functools.cache
def repository_files() -> list[str]:
    """Return the paths of the repository's Python files (its hidden folders left out)."""
    tops = [p for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted(p.relative_to(ROOT).as_posix() for top in tops for p in top.rglob("*.py"))


def resolves(mention: str, files: list[str]) -> bool:
    """Return whether a `.py` mention names a file of the repository: by its path from the root
    or from any folder on the way (`records/record.py`, `gateway/records/record.py`), or by its
    bare name; a package's own name before a path inside it counts (`gateway/app.py`)."""
    if mention in PERSONS_FILES:
        return True
    for package, root in PACKAGES.items():
        inside = mention.removeprefix(f"{package}/")
        if inside != mention and (root / inside).is_file():
            return True
    return any(f"/{path}".endswith(f"/{mention}") for path in files)


def unknown_mentions(doc: str) -> list[str]:
    """Return the `.py` files `doc` mentions that do not exist."""
    files = repository_files()
    return sorted({m for m in PY_MENTION.findall(doc) if not resolves(m, files)})


def test_every_product_module_is_on_the_map() -> None:
    missing = missing_modules(DOC.read_text())
    assert not missing, f"{DOC.relative_to(ROOT)} does not name: {', '.join(missing)}"


def test_the_map_names_no_module_that_is_gone() -> None:
    unknown = unknown_mentions(DOC.read_text())
    assert not unknown, f"{DOC.relative_to(ROOT)} names files that do not exist: {unknown}"


# (what the doc says, module path, its stem, unique stem, named)
NAMING = [
    ("| `gateway/kernels/registry.py` |", "kernels/registry.py", "registry", True, True),
    ("see `kernels/registry` for names", "kernels/registry.py", "registry", True, True),
    ("```\n kernels/ registry · pool\n```", "kernels/registry.py", "registry", True, True),
    ("```\n kernels/ registry · pool\n```", "kernels/registry.py", "registry", False, False),
    ("```\n extension.py picks\n```", "gateway/extension.py", "extension", True, True),
    ("registry, outside the diagram", "kernels/registry.py", "registry", True, False),
    ("```\n registry_view\n```", "kernels/registry.py", "registry", True, False),
    ("```\n kernels/{id}/kernel.json\n```", "kernels/kernel.py", "kernel", True, False),
    ("```\n loomgate-mcp\n```", "mcp_server/mcp.py", "mcp", True, False),
    ("| `upstream/channels.py` |", "kernels/channels.py", "channels", False, False),
    ("| `gateway/app.py` |", "gateway/app.py", "app", True, True),
    ("| `other/app.py` |", "gateway/app.py", "app", True, False),
]


@pytest.mark.parametrize(("doc", "path", "stem", "unique", "expected"), NAMING)
def test_how_a_module_is_named(
    doc: str, path: str, stem: str, unique: bool, expected: bool
) -> None:
    assert named(path, stem, doc if "```" in doc else f"```\n```\n{doc}", unique) is expected


@pytest.mark.parametrize(
    ("mention", "exists"),
    [
        ("gateway/records/record.py", True),
        ("records/record.py", True),
        ("kernel_tools.py", True),
        ("shared/src/loomgate/shared/wire.py", True),
        ("bench/mutation.py", True),
        ("gateway/__main__.py", True),
        ("browser.py", True),  # tests/support/browser.py
        ("mcp_server/kernel_setup.py", False),  # it is client/kernel_setup.py
        ("records/nothing.py", False),
        ("nothing.py", False),
    ],
)
def test_which_mentions_resolve(mention: str, exists: bool) -> None:
    assert resolves(mention, repository_files()) is exists
