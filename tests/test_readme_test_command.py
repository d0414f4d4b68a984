"""The test command a newcomer copies is the one the README times and CI runs: the same
`uv run pytest` in the README's Run and Test sections, its CI paragraph and `.ci/run`, with the
workers it times asked for by pyproject.toml (three, fewer for fewer named test files)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from tests.support.workers import WORKERS, workers_for

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "uv run pytest"


def section(text: str, title: str) -> str:
    """Return the body of the README's `## title` section."""
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def pytest_commands(lines: list[str]) -> list[str]:
    """Return the `uv run pytest …` commands among shell lines, comments left out."""
    commands = [shlex.split(line, comments=True) for line in lines]
    return [shlex.join(words) for words in commands if words[:3] == COMMAND.split()]


def sh_block(text: str) -> list[str]:
    """Return the lines of the first ```sh block of `text`."""
    return text.split("```sh\n", 1)[1].split("\n```", 1)[0].splitlines()


def test_the_readme_ci_and_the_timed_command_are_one() -> None:
    readme = (ROOT / "README.md").read_text()
    [run] = pytest_commands(sh_block(section(readme, "Run")))
    test_section = section(readme, "Test")
    timed = pytest_commands(sh_block(test_section))[0]
    ci = pytest_commands((ROOT / ".ci" / "run").read_text().splitlines())
    assert run == timed == COMMAND
    assert ci == [COMMAND]  # .ci/run calls exactly the README's command, once
    assert f"and then `{COMMAND}`, the command above" in " ".join(test_section.split())
    timing = sh_block(test_section)[0]
    assert "three workers" in timing  # the figure is for the workers the command starts


def test_the_workers_are_asked_for_by_default() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    addopts = shlex.split(options["ini_options"]["addopts"])
    assert addopts[addopts.index("-n") + 1] == "auto"
    assert addopts[addopts.index("--dist") + 1] == "loadfile"
    assert WORKERS == 3


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], WORKERS),  # no testpaths
        (["tests"], WORKERS),  # the testpaths: `uv run pytest`
        (["tests/gateway"], WORKERS),
        (["tests/test_layout.py"], 0),  # one file: this process
        (["tests/test_layout.py::test_x", "tests/test_layout.py::test_y"], 0),
        (["tests/test_layout.py", "tests/test_packaging.py"], 2),
        (["tests/a.py", "tests/test_layout.py"], WORKERS),  # pytest says what is missing
        (
            [
                f"tests/test_{name}.py"
                for name in ("layout", "packaging", "install", "import_cycles")
            ],
            WORKERS,
        ),
        (["tests/test_layout.py", "tests/gateway"], WORKERS),
    ],
)
def test_workers_for_a_command(args: list[str], expected: int) -> None:
    assert workers_for(args, ROOT) == expected
