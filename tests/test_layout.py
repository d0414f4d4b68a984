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
GATEWAY = SOURCES["gateway"]
# The gateway's floors, top to bottom, as docs/architecture.md draws them: a room (a folder, or a
# module at the package's root) imports only rooms on floors below its own, so no two rooms
# import each other. The package's own __init__ (its version) is below them all.
FLOORS = [
    ("__main__",),
    ("app", "extension"),
    ("handlers", "auth", "request_log"),
    ("monitor", "upstream", "live_cells"),
    ("kernels", "export", "shared_cell"),
    ("residency",),
    ("sandbox",),
    ("records",),
    ("errors", "events", "jupyter_internals", "process_identity", "process_end", "gateway_log"),
]
FLOORS_HEADING = "## The gateway's floors"
SANDBOX = GATEWAY / "sandbox"
SANDBOX_ENTRY = "loomgate.gateway.sandbox"
# The sandbox's rooms, top to bottom as docs/architecture.md draws them: a room imports only the
# rooms below it, each module by its full path; the rest of the gateway imports only the entry
# (sandbox/__init__.py), which re-exports what it uses.
SANDBOX_ROOMS = [("failures",), ("confinement",), ("policy",), ("network",)]
SANDBOX_HEADING = "## The sandbox's rooms"
# One concept per file: past SOFT_LINES a module's docstring says why it is still one concept
# ("Longer than 400 lines: …"); past HARD_LINES it is split, whatever the reason.
SOFT_LINES = 400
HARD_LINES = 600
REASON = "Longer than 400 lines:"


def imported_modules(path: Path) -> set[str]:
    """Return every module name `path` imports (`from a import b` names `a` and `a.b`: `b` may be
    a module)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def room_path(room: str) -> Path:
    """Return where a room of the gateway lives: its folder, or its module at the root."""
    folder = GATEWAY / room
    return folder if folder.is_dir() else GATEWAY / f"{room}.py"


def floor_rules(floors: list[tuple[str, ...]]) -> list[tuple[str, tuple[str, ...]]]:
    """Return, for each room of `floors` (top to bottom), the rooms it must not import: every
    other room on its own floor and on the floors above it."""
    rules = []
    for level, floor in enumerate(floors):
        at_or_above = [room for upper in floors[: level + 1] for room in upper]
        for room in floor:
            rules.append((room, tuple(other for other in at_or_above if other != room)))
    return rules


RULES += [
    (
        room_path(room),
        tuple(f"loomgate.gateway.{other}" for other in forbidden),
        f"the gateway's {room} imports only the rooms on the floors below its own "
        "(docs/architecture.md, the gateway's floors)",
    )
    for room, forbidden in floor_rules(FLOORS)
]


def sandbox_parts(folder: Path) -> list[str]:
    """Return what `folder` (the sandbox) holds beside its entry, by name: its rooms (folders
    with Python in them) and any module at its root."""
    return sorted(
        path.stem
        for path in folder.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and any(path.rglob("*.py")))
    )


RULES += [
    (
        room_path(room),
        tuple(f"{SANDBOX_ENTRY}.{part}" for part in sandbox_parts(SANDBOX)),
        f"the gateway's {room} imports the sandbox only through its entry, "
        f"{SANDBOX_ENTRY} (docs/architecture.md, the sandbox's rooms)",
    )
    for floor in FLOORS
    for room in floor
    if room != "sandbox"
]
RULES += [
    (
        SANDBOX / room,
        tuple(f"{SANDBOX_ENTRY}.{other}" for other in forbidden),
        f"the sandbox's {room} imports only the rooms below it "
        "(docs/architecture.md, the sandbox's rooms)",
    )
    for room, forbidden in floor_rules(SANDBOX_ROOMS)
]


def through_entry(path: Path) -> bool:
    """Return whether `path` imports from the sandbox's entry (`from loomgate.gateway.sandbox
    import …`) instead of a module of a room by its full path."""
    tree = ast.parse(path.read_text(), str(path))
    return any(
        isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == SANDBOX_ENTRY
        for node in ast.walk(tree)
    )


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
    assert imported_modules(bad) == {
        "loomgate.translator",
        "loomgate.translator.presentation",
        "mcp.types",
    }
    assert breaks("loomgate.gateway.kernels", ("loomgate.gateway.kernels",))


@pytest.mark.parametrize(
    ("floors", "expected"),
    [
        ([("a",), ("b",)], [("a", ()), ("b", ("a",))]),
        ([("a", "b"), ("c",)], [("a", ("b",)), ("b", ("a",)), ("c", ("a", "b"))]),
        (
            [("a",), ("b", "c"), ("d",)],
            [("a", ()), ("b", ("a", "c")), ("c", ("a", "b")), ("d", ("a", "b", "c"))],
        ),
    ],
)
def test_a_room_may_import_only_the_floors_below_it(
    floors: list[tuple[str, ...]], expected: list[tuple[str, tuple[str, ...]]]
) -> None:
    assert floor_rules(floors) == expected


def test_every_room_of_the_gateway_is_on_a_floor() -> None:
    rooms = {
        path.stem
        for path in GATEWAY.iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and (path / "__init__.py").exists())
    }
    placed = [room for floor in FLOORS for room in floor]
    assert len(placed) == len(set(placed)), f"a room on two floors: {placed}"
    assert rooms == set(placed), (
        f"on no floor: {sorted(rooms - set(placed))}; no such room: {sorted(set(placed) - rooms)}"
    )
    package = imported_modules(GATEWAY / "__init__.py")
    assert not [name for name in package if name.startswith("loomgate.gateway")]


@pytest.mark.parametrize("room", [room for (room,) in SANDBOX_ROOMS])
def test_a_sandbox_room_never_imports_the_entry(room: str) -> None:
    files = sources(SANDBOX / room)
    assert files, f"no sources found at {SANDBOX / room}"
    offenders = [str(path.relative_to(ROOT)) for path in files if through_entry(path)]
    assert not offenders, (
        f"these import from {SANDBOX_ENTRY}, the entry that imports them: name the module of "
        f"its room instead ({SANDBOX_ENTRY}.<room>.<module>): {offenders}"
    )


def test_every_module_of_the_sandbox_lies_in_a_room() -> None:
    rooms = [room for (room,) in SANDBOX_ROOMS]
    assert sandbox_parts(SANDBOX) == sorted(rooms), (
        f"sandbox/ holds only its entry and its rooms {rooms}: move "
        f"{sorted(set(sandbox_parts(SANDBOX)) - set(rooms))} into one"
    )
    for room in rooms:
        assert (SANDBOX / room / "__init__.py").is_file(), f"sandbox/{room}/ has no __init__.py"


def test_the_sandbox_rules_detect_a_violation(tmp_path: Path) -> None:
    sandbox = tmp_path / "sandbox"
    for room in ("network", "policy"):
        (sandbox / room).mkdir(parents=True)
        (sandbox / room / "__init__.py").write_text("")
    (sandbox / "__init__.py").write_text("")
    assert sandbox_parts(sandbox) == ["network", "policy"]
    (sandbox / "stray.py").write_text("")
    assert sandbox_parts(sandbox) == ["network", "policy", "stray"]

    outside = tmp_path / "outside.py"
    outside.write_text("from loomgate.gateway.sandbox.policy.profiles import SandboxRules\n")
    forbidden = tuple(f"{SANDBOX_ENTRY}.{part}" for part in sandbox_parts(sandbox))
    assert [name for name in imported_modules(outside) if breaks(name, forbidden)]
    outside.write_text("from loomgate.gateway.sandbox import SandboxRules, stray\n")
    assert [name for name in imported_modules(outside) if breaks(name, forbidden)] == [
        "loomgate.gateway.sandbox.stray"
    ]
    outside.write_text("from loomgate.gateway.sandbox import SandboxRules\n")
    assert not [name for name in imported_modules(outside) if breaks(name, forbidden)]
    assert not through_entry(sandbox / "__init__.py")

    rules = dict(floor_rules(SANDBOX_ROOMS))
    assert rules["network"] == ("failures", "confinement", "policy")
    assert rules["failures"] == ()
    assert breaks(f"{SANDBOX_ENTRY}.policy.profiles", (f"{SANDBOX_ENTRY}.policy",))
    assert not breaks(f"{SANDBOX_ENTRY}.policy_x", (f"{SANDBOX_ENTRY}.policy",))

    inside = sandbox / "policy" / "profiles.py"
    inside.write_text("from loomgate.gateway.sandbox import SandboxRules\n")
    assert through_entry(inside)
    inside.write_text("from loomgate.gateway.sandbox.network.network_rules import NO_NETWORK\n")
    assert not through_entry(inside)
    inside.write_text("from loomgate.gateway.sandbox.network import network_rules\n")
    assert not through_entry(inside)


def test_the_floors_are_the_ones_the_architecture_draws() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert FLOORS_HEADING in doc, f"docs/architecture.md has no section {FLOORS_HEADING!r}"
    block = doc.split(FLOORS_HEADING, 1)[1].split("```", 2)[1]
    drawn = [
        tuple(room.strip().rstrip("/") for room in line.split("·"))
        for line in block.strip("\n").splitlines()
    ]
    assert drawn == FLOORS


def test_the_sandbox_rooms_are_the_ones_the_architecture_draws() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert SANDBOX_HEADING in doc, f"docs/architecture.md has no section {SANDBOX_HEADING!r}"
    block = doc.split(SANDBOX_HEADING, 1)[1].split("```", 2)[1]
    drawn = [(line.strip().rstrip("/"),) for line in block.strip("\n").splitlines()]
    assert drawn == SANDBOX_ROOMS


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
