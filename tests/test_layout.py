"""The architecture's rules, read from the imports: who may import whom, and file sizes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {
    "gateway": ROOT / "gateway" / "src" / "loomgate" / "gateway",
    "translator": ROOT / "translator" / "src" / "loomgate" / "translator",
    "shared": ROOT / "shared" / "src" / "loomgate" / "shared",
}
TRANSLATOR = SOURCES["translator"]
# (files, imports they must not make, why)
RULES = [
    (
        SOURCES["gateway"],
        ("loomgate.translator",),
        "the gateway never imports the translator",
    ),
    (
        TRANSLATOR,
        ("loomgate.gateway", "jupyter_server", "jupyter_client", "ipykernel", "regex"),
        "the translator installs without jupyter_server, and never imports the gateway",
    ),
    (
        SOURCES["shared"],
        ("loomgate.gateway", "loomgate.translator", "jupyter_server", "mcp", "regex", "httpx"),
        "shared holds only what both halves use, with no heavy dependency",
    ),
    (
        TRANSLATOR / "client",
        ("loomgate.translator.mcp_server", "loomgate.translator.cli", "mcp", "argparse"),
        "the gateway client serves the MCP server and the CLI alike",
    ),
    (
        TRANSLATOR / "client",
        ("loomgate.translator.presentation",),
        "the gateway client makes no text for people: presentation words what it reports",
    ),
    (
        TRANSLATOR / "cli",
        ("loomgate.translator.mcp_server", "mcp"),
        "the person's CLI does not need the MCP server",
    ),
    (
        TRANSLATOR / "mcp_server",
        ("loomgate.translator.cli",),
        "the MCP server does not need the person's CLI",
    ),
    (
        TRANSLATOR / "presentation",
        ("loomgate.translator.client", "loomgate.translator.mcp_server", "loomgate.translator.cli"),
        "presentation turns wire shapes into text and nothing else",
    ),
]
# One concept per file: past SOFT_LINES a module's docstring says why it is still one concept
# ("Longer than 400 lines: …"); past HARD_LINES it is split, whatever the reason.
SOFT_LINES = 400
HARD_LINES = 600
REASON = "Longer than 400 lines:"


def imported_modules(path: Path) -> set[str]:
    """Return every module name `path` imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def sources(root: Path) -> list[Path]:
    """Return the Python files at `root` (a file, or a folder searched recursively)."""
    return [root] if root.is_file() else sorted(root.rglob("*.py"))


def breaks(name: str, forbidden: tuple[str, ...]) -> bool:
    """Return whether importing `name` breaks a rule against the `forbidden` prefixes."""
    return any(name == prefix or name.startswith(prefix + ".") for prefix in forbidden)


@pytest.mark.parametrize(
    ("root", "forbidden", "why"), RULES, ids=[str(r[0].relative_to(ROOT)) for r in RULES]
)
def test_import_rule(root: Path, forbidden: tuple[str, ...], why: str) -> None:
    files = sources(root)
    assert files, f"no sources found at {root}"
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in files
        for name in imported_modules(path)
        if breaks(name, forbidden)
    ]
    assert not offenders, f"{why}: {offenders}"


@pytest.mark.parametrize(
    ("name", "forbidden", "broken"),
    [
        ("loomgate.translator.presentation", ("loomgate.translator",), True),
        ("mcp.server.mcpserver", ("mcp",), True),
        ("mcp_types", ("mcp",), False),
        ("loomgate.translator.client", ("loomgate.translator.cli",), False),
    ],
)
def test_rule_matches_whole_module_names(
    name: str, forbidden: tuple[str, ...], broken: bool
) -> None:
    assert breaks(name, forbidden) is broken


def test_rule_detects_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from loomgate.translator import presentation\nimport mcp.types\n")
    assert imported_modules(bad) == {"loomgate.translator", "mcp.types"}


def test_product_files_hold_one_concept() -> None:
    large = []
    for part in SOURCES.values():
        for path in sources(part):
            text = path.read_text()
            lines = len(text.splitlines())
            docstring = ast.get_docstring(ast.parse(text)) or ""
            if lines > HARD_LINES or (lines > SOFT_LINES and REASON not in docstring):
                large.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not large, (
        f"split these by responsibility (over {HARD_LINES} lines always; over {SOFT_LINES} "
        f"unless the module docstring says {REASON!r} and why): {large}"
    )
