"""The architecture rule: the gateway and the translator never import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PARTS = {
    "gateway": ROOT / "gateway" / "src" / "loomgate" / "gateway",
    "translator": ROOT / "translator" / "src" / "loomgate" / "translator",
    "shared": ROOT / "shared" / "src" / "loomgate" / "shared",
}
FORBIDDEN = {
    "gateway": ("loomgate.translator",),
    "translator": ("loomgate.gateway", "jupyter_server", "ipykernel"),
    "shared": ("loomgate.gateway", "loomgate.translator", "jupyter_server", "mcp"),
}


def imported_modules(path: Path) -> set[str]:
    """Return every module name `path` imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("part", sorted(PARTS))
def test_part_does_not_import_the_other_half(part: str) -> None:
    files = sorted(PARTS[part].rglob("*.py"))
    assert files, f"no sources found for {part}"
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in files
        for name in imported_modules(path)
        if name.startswith(FORBIDDEN[part])
    ]
    assert not offenders, offenders


def test_rule_detects_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from loomgate.translator import presentation\n")
    assert "loomgate.translator" in imported_modules(bad)
