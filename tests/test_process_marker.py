"""The `process` marker: a parameter that shares a process fixture's name starts nothing."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("gateway", ["local"])
def test_a_parameter_named_like_a_process_fixture_is_not_marked(
    request: pytest.FixtureRequest, gateway: str
) -> None:
    assert gateway == "local"
    assert request.node.get_closest_marker("process") is None


@pytest.mark.parametrize(("kernel", "gateway"), [("lab", "local")])
def test_a_column_named_like_a_process_fixture_is_not_marked(
    request: pytest.FixtureRequest, kernel: str, gateway: str
) -> None:
    assert (kernel, gateway) == ("lab", "local")
    assert request.node.get_closest_marker("process") is None
