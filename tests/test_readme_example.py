"""The README's first example, followed literally: its Run section's `loomgate` commands, in
order, through the real CLI on a fresh state dir (the first one starts the gateway), print what
the README shows, numbers included."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from loomgate.shared.paths import write_port_file
from tests.support.gateways import free_port, stop_local_gateway
from tests.translator.cli.test_commands import loomgate

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
COMMAND = ["uv", "run", "loomgate"]
# How long a cell took differs from run to run: "[completed after 2 ms]", "[… after 1.2 s]".
ELAPSED = re.compile(r"\[(\w+) after [^\]]+\]")


def section(text: str, title: str) -> str:
    """Return the body of the README's `## title` section."""
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[list[str]]:
    """Return the lines of each fenced block of `language` in `text`."""
    return [block.split("\n```", 1)[0].splitlines() for block in text.split(f"```{language}\n")[1:]]


def example(readme: str) -> list[tuple[list[str], list[str] | None]]:
    """Return the Run section's `loomgate` commands in order, each with the output the README
    shows for it (None: a command of the `sh` block, whose comment says what it does)."""
    run = section(readme, "Run")
    steps: list[tuple[list[str], list[str] | None]] = []
    for line in blocks(run, "sh")[0]:
        words = shlex.split(line, comments=True)
        if words[:3] == COMMAND:
            steps.append((words[3:], None))
    for block in blocks(run, "console"):
        for line in block:
            if line.startswith("$ "):
                words = shlex.split(line[2:])
                assert words[:3] == COMMAND, line
                steps.append((words[3:], []))
            else:
                shown = steps[-1][1]
                assert shown is not None, line
                shown.append(line)
    return steps


def without_times(lines: list[str]) -> list[str]:
    """Return `lines` with each cell's elapsed time left out."""
    return [ELAPSED.sub(r"[\1 after …]", line) for line in lines]


def test_the_example_is_read_from_the_readme() -> None:
    steps = example(README.read_text())
    assert [args for args, _ in steps] == [
        ["run", "print('hello')"],
        ["run", "x = 1"],
        ["run", "x + 1"],
    ]
    assert steps[-1][1] is not None and "Out[3]: 2" in steps[-1][1]


async def test_the_readme_example_prints_what_it_shows(tmp_path: Path) -> None:
    state = tmp_path / "state"
    # Not the default port 8787 (another gateway may hold it): the port a stopped gateway kept.
    write_port_file(state, free_port())
    env = {
        **os.environ,
        "LOOMGATE_STATE_DIR": str(state),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # no sandbox.toml: the shipped default
    }
    try:
        [first, *shown] = example(README.read_text())
        status, out, err = await loomgate(env, *first[0])
        assert status == 0, err
        assert out.splitlines()[:2] == ["In [1]:", "hello"], out  # the first command's cell
        for args, expected in shown:
            status, out, err = await loomgate(env, *args)
            assert (status, err) == (0, ""), (args, err)
            assert expected is not None
            assert without_times(out.splitlines()) == without_times(expected), (args, out)
    finally:
        await loomgate(env, "gateway", "stop")
        stop_local_gateway(state)
