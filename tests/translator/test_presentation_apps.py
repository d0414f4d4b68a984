"""The MCP Apps view's sentences, whole: an app-only tool refused, an interrupt that found
nothing running, and the one line beside an app tool's data."""

from __future__ import annotations

import pytest

from loomgate.translator.presentation.apps import (
    app_only_refusal,
    not_running_refusal,
    view_summary,
)


def test_an_app_only_tool_refused_names_the_tool_and_the_extension() -> None:
    assert app_only_refusal("view_output") == (
        "view_output serves loomgate's execution view inside an MCP Apps host; this client did "
        "not negotiate the MCP Apps extension (io.modelcontextprotocol/ui)."
    )


@pytest.mark.parametrize(
    ("state", "said"),
    [
        (None, "In [7] is not running; nothing was interrupted."),
        ("completed", "In [7] is not running (it is completed); nothing was interrupted."),
        (
            "awaiting_input",
            "In [7] is not running (it is awaiting input); nothing was interrupted.",
        ),
    ],
)
def test_an_interrupt_that_found_nothing_running_says_what_the_cell_is(
    state: str | None, said: str
) -> None:
    assert not_running_refusal(7, state) == said


@pytest.mark.parametrize(
    ("state", "said"),
    [("running", "In [3]: running"), ("awaiting_input", "In [3]: awaiting input")],
)
def test_the_line_beside_an_app_tools_data(state: str, said: str) -> None:
    assert view_summary(3, state) == said
