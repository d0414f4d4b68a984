"""A tool argument's former name taken as its current one, before the unknown ones are refused."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.translator.mcp_server.argument_errors import current_names, unknown_arguments_sentence


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("wait", {"timeout_seconds": 5}, {"wait_seconds": 5}),
        ("wait", {"execution": 2, "timeout_seconds": 0}, {"execution": 2, "wait_seconds": 0}),
        ("wait", {"wait_seconds": 5}, {"wait_seconds": 5}),
        # Under both names: left for the refusal of the unknown one.
        (
            "wait",
            {"wait_seconds": 5, "timeout_seconds": 7},
            {"wait_seconds": 5, "timeout_seconds": 7},
        ),
        # Only wait ever took it.
        ("run_cell", {"code": "1", "timeout_seconds": 5}, {"code": "1", "timeout_seconds": 5}),
        ("status", {}, {}),
    ],
)
def test_former_names_become_current_ones(
    tool: str, arguments: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert current_names(tool, arguments) == expected


@pytest.mark.parametrize(
    ("tool", "unknown", "known", "expected"),
    [
        (
            "run_cell",
            ["timeout_seconds"],
            ["code", "wait_seconds", "full_output", "kernel"],
            "run_cell has no argument 'timeout_seconds' (did you mean wait_seconds?); nothing "
            "was run. It takes: code, wait_seconds, full_output, kernel.",
        ),
        (
            "wait",
            ["timeout"],
            ["execution", "wait_seconds", "until_silent_seconds", "kernel"],
            "wait has no argument 'timeout' (did you mean wait_seconds?); nothing was run. It "
            "takes: execution, wait_seconds, until_silent_seconds, kernel.",
        ),
    ],
)
def test_a_guess_at_how_long_to_wait_is_pointed_at_wait_seconds(
    tool: str, unknown: list[str], known: list[str], expected: str
) -> None:
    assert unknown_arguments_sentence(tool, unknown, known) == expected
