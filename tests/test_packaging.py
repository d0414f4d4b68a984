"""The packaging the three packages and the root share: the root wheel repeats its members'
dependencies, scripts, entry points and Jupyter config (it carries their code, so that pip
installs the clone in one command), and uv's cache-keys name sources and metadata, never the
__pycache__ files every run writes (they made `uv run` rebuild the packages now and then)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
MEMBERS = ("shared", "gateway", "translator")
PACKAGES = (".", *MEMBERS)
LOOMGATE = {"loomgate-shared", "loomgate-gateway", "loomgate-translator"}
# What a run of Python or of the tools writes inside a package dir.
PARTS = ("src", "jupyter-config")  # a package's sources, and the Jupyter config it ships
WRITTEN_BY_RUNS = ("__pycache__/{stem}.cpython-311.pyc", "__pycache__/{stem}.cpython-310.pyc")


def project(directory: str) -> dict[str, Any]:
    """Return the pyproject.toml of the package in `directory` (relative to the clone)."""
    document: dict[str, Any] = tomllib.loads((ROOT / directory / "pyproject.toml").read_text())
    return document


def requirement_name(requirement: str) -> str:
    """Return the project name a requirement string names."""
    name = requirement.split(";")[0]
    for mark in "<>=!~[ @":
        name = name.split(mark)[0]
    return name.strip().lower().replace("_", "-")


def test_the_root_depends_on_what_its_members_depend_on() -> None:
    root = set(project(".")["project"]["dependencies"])
    members = {
        requirement
        for member in MEMBERS
        for requirement in project(member)["project"]["dependencies"]
        if requirement_name(requirement) not in LOOMGATE
    }
    assert root == members
    assert not {requirement_name(r) for r in root} & LOOMGATE  # pip cannot resolve those


def test_the_root_offers_the_gateways_extras() -> None:
    gateway = project("gateway")["project"]["optional-dependencies"]
    assert project(".")["project"]["optional-dependencies"] == gateway
    assert set(gateway) == {"ipymini"}


def test_the_translator_needs_no_jupyter_server() -> None:
    names = {requirement_name(r) for r in project("translator")["project"]["dependencies"]}
    assert not names & {"jupyter-server", "jupyter-client", "ipykernel", "loomgate-gateway"}


def test_the_root_carries_the_members_scripts_entry_points_and_jupyter_config() -> None:
    root = project(".")
    scripts: dict[str, str] = {}
    entry_points: dict[str, dict[str, str]] = {}
    for member in MEMBERS:
        scripts |= project(member)["project"].get("scripts", {})
        for group, points in project(member)["project"].get("entry-points", {}).items():
            entry_points.setdefault(group, {}).update(points)
    assert root["project"]["scripts"] == scripts
    assert root["project"]["entry-points"] == entry_points
    wheel = root["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert wheel["packages"] == [f"{member}/src/loomgate" for member in MEMBERS]
    assert wheel["dev-mode-dirs"] == [f"{member}/src" for member in MEMBERS]
    gateway_data = project("gateway")["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert wheel["shared-data"] == {f"gateway/{src}": dst for src, dst in gateway_data.items()}


def test_the_shipped_jupyter_config_lists_the_extension_disabled() -> None:
    data = project("gateway")["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    [(source, target)] = data.items()
    assert target == "etc/jupyter/jupyter_server_config.d/loomgate.gateway.json"
    config = json.loads((ROOT / "gateway" / source).read_text())
    assert config == {"ServerApp": {"jpserver_extensions": {"loomgate.gateway": False}}}


def source_dirs(directory: str) -> list[str]:
    """Return the dirs holding the sources and data of the package in `directory`."""
    members = MEMBERS if directory == "." else (".",)
    base = "" if directory == "." else f"{directory}/"
    return [f"{base}{m}/{part}".replace("./", "") for m in members for part in PARTS]


def package_tree(directory: str, copy: Path) -> set[str]:
    """Make in `copy` a tree of empty files with the sources and metadata of the package in
    `directory`, plus what runs write beside them; return the sources' paths (relative to the
    package, as cache-keys name them)."""
    package = ROOT / directory
    sources = {"pyproject.toml"}
    for name in source_dirs(directory):
        sources |= {
            path.relative_to(package).as_posix()
            for path in (ROOT / name).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        }
    for source in sources:
        target = copy / source
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
        for written in WRITTEN_BY_RUNS:
            cached = target.parent / written.format(stem=target.stem)
            cached.parent.mkdir(exist_ok=True)
            cached.touch()
    return sources


def cache_key_matches(directory: str, copy: Path) -> set[str]:
    """Return the files in `copy` that `directory`'s cache-keys match (as uv globs them)."""
    keys = project(directory)["tool"]["uv"]["cache-keys"]
    matched: set[str] = set()
    for key in keys:
        matched |= {p.relative_to(copy).as_posix() for p in copy.glob(key["file"]) if p.is_file()}
    return matched


@pytest.mark.parametrize("directory", PACKAGES)
def test_cache_keys_match_the_sources_and_nothing_a_run_writes(
    directory: str, tmp_path: Path
) -> None:
    sources = package_tree(directory, tmp_path)
    assert any(s.endswith(".py") for s in sources)
    matched = cache_key_matches(directory, tmp_path)
    assert not [path for path in matched if "__pycache__" in path]
    assert matched == sources
