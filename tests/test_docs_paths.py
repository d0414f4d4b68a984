"""Every path README.md and docs/*.md name exists.

A backquoted name is a path of the repository when it has a `/`, no spaces or placeholders
(`{id}`, `*`, `$HOME`, `~`), and starts with a top-level entry of the repository (`docs/x.md`,
`bench/results/`, `.ci/run`) or with a folder or module of a package, the way
docs/architecture.md names modules: from the package (`kernels/registry.py`, `records/`) or with
the package before it (`gateway/app.py`, `translator/mcp_server/stdio.py`). Starting with a
package's folder, it names a file (its last part has an extension) or a folder (it ends in `/`):
`kernels/k1/executions/3` is an endpoint's path, not a file. A document named in the text
without quotes (docs/sandbox.md, bench/results/sandbox.md) is a path too. `…` stands for any folders
(`translator/…/client/local_gateway.py`). It exists when it is found from the repository's root,
from a package's `src/loomgate/`, or from the package itself. A Markdown link or image that is no
URL names a path from the document's own folder. Names of the person's files (`~/.ssh`,
`$XDG_CONFIG_HOME/loomgate/sandbox.toml`), of the state dir (`kernels/{id}/resident.json`) and
what tests make (`test-artifacts/`, ignored by git) are not paths of the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PACKAGES = ("gateway", "translator", "shared")
# A hidden top-level folder of the repository (others, .git and the caches, are no one's docs).
HIDDEN_TOP = frozenset({".ci"})
BACKQUOTED = re.compile(r"`([^`\s]+)`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A Markdown file named by its path in the text, without quotes (`docs/sandbox.md`).
BARE_DOCUMENT = re.compile(r"(?<![\w./`-])((?:[\w.-]+/)+[\w.-]+\.md)\b")
NOT_A_PATH = re.compile(r"[{}*?=\"'<>\[\]$~@|,;()]|://")


def gitignored() -> set[str]:
    """Return the top-level names .gitignore leaves out (`test-artifacts/`, `.venv/`)."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return {line.strip().strip("/") for line in lines if line.strip() and "/" not in line[:-1]}


def top_level() -> set[str]:
    """Return the repository's top-level entries: its files and folders, not what git ignores."""
    ignored = gitignored()
    names = {entry.name for entry in ROOT.iterdir()}
    return {n for n in names if n not in ignored and (not n.startswith(".") or n in HIDDEN_TOP)}


def package_level() -> set[str]:
    """Return the folders and modules directly inside each package (`kernels`, `wire.py`)."""
    names = set()
    for package in PACKAGES:
        inside = ROOT / package / "src" / "loomgate" / package
        names |= {entry.name for entry in inside.iterdir() if entry.name != "__pycache__"}
    return names


def bases() -> list[Path]:
    """Return the folders a path may be named from: the root, each `src/loomgate/`, each package."""
    found = [ROOT]
    for package in PACKAGES:
        source = ROOT / package / "src" / "loomgate"
        found += [source, source / package]
    return found


def is_repository_path(name: str, top: set[str], inner: set[str]) -> bool:
    """Return whether a backquoted `name` is a path of the repository (the module docstring)."""
    if "/" not in name or NOT_A_PATH.search(name):
        return False
    first, last = name.split("/", 1)[0], name.rstrip("/").rsplit("/", 1)[-1]
    if name.startswith(("/", "~", ".")) and first not in HIDDEN_TOP:
        return False
    if first in top:
        return True
    return first in inner and (name.endswith("/") or "." in last)


def exists(name: str, folders: list[Path]) -> bool:
    """Return whether `name` is found from one of `folders` (`…` standing for any folders)."""
    for folder in folders:
        if "…" in name:
            pattern = name.strip("/").replace("/…/", "/**/").replace("…/", "**/")
            if any(folder.glob(pattern)):
                return True
        elif (folder / name).exists():
            return True
    return False


def missing_paths(doc: Path, text: str) -> list[str]:
    """Return the paths `text` (the document at `doc`) names that do not exist."""
    top, inner, folders = top_level(), package_level(), bases()
    names = BACKQUOTED.findall(text) + BARE_DOCUMENT.findall(text)
    missing = [
        name for name in names if is_repository_path(name, top, inner) and not exists(name, folders)
    ]
    for target in LINK.findall(text):
        path = target.split("#", 1)[0]
        local = path and "://" not in path and not path.startswith("mailto:")
        if local and not (doc.parent / path).exists():
            missing.append(target)
    return sorted(set(missing))


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.relative_to(ROOT).as_posix())
def test_every_path_a_doc_names_exists(doc: Path) -> None:
    missing = missing_paths(doc, doc.read_text())
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


# (a backquoted name, whether it is a path of the repository, whether it exists)
NAMES = [
    ("docs/measured.md", True, True),
    ("docs/nothing.md", True, False),
    ("bench/results/stress-xN.md", True, False),
    ("bench/results/", True, True),
    (".ci/run", True, True),
    ("pyproject.toml", False, False),  # no `/`: a file name, as `gateway.json` is
    ("kernels/registry.py", True, True),
    ("kernels/nothing.py", True, False),
    ("records/", True, True),
    ("gateway/app.py", True, True),
    ("translator/mcp_server/stdio.py", True, True),
    ("gateway/records/output_log.OutputKind", True, False),
    ("translator/…/client/local_gateway.py", True, True),
    ("translator/…/client/nothing.py", True, False),
    ("shared/src/loomgate/shared/wire.py", True, True),
    ("kernels/k1/executions/3", False, False),  # an endpoint's path
    ("kernels/{id}/resident.json", False, False),  # the state dir
    ("~/.ssh", False, False),
    ("$XDG_CONFIG_HOME/loomgate/sandbox.toml", False, False),
    ("/api/loomgate/kernels", False, False),
    ("ui://loomgate/execution", False, False),
    ("test-artifacts/apps/", False, False),  # made by tests, ignored by git
    (".vscode/settings.json", False, False),
    ("etc/jupyter/jupyter_server_config.d/loomgate.gateway.json", False, False),
]


@pytest.mark.parametrize(("name", "is_path", "found"), NAMES)
def test_what_a_path_is_and_whether_it_exists(name: str, is_path: bool, found: bool) -> None:
    assert is_repository_path(name, top_level(), package_level()) is is_path
    if is_path:
        assert exists(name, bases()) is found


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("see `docs/sandbox.md` and [it](sandbox.md)", []),
        ("![a picture](nothing.png) and [a site](https://example.org/x.md)", ["nothing.png"]),
        ("[a section](#use-from-an-mcp-host), [another doc's](sandbox.md#profiles)", []),
        ("`bench/results/stress-xN.md`, `kernels/k1/executions/3`", ["bench/results/stress-xN.md"]),
        ("details: docs/sandbox.md; the rest: docs/nothing.md.", ["docs/nothing.md"]),
        ("a [link](https://example.org/docs/nothing.md)", []),
    ],
)
def test_missing_paths_in_a_doc(text: str, missing: list[str]) -> None:
    assert missing_paths(ROOT / "docs" / "x.md", text) == missing
