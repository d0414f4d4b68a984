"""The reliability suite's report: each test records what it checked and how much.

`LOOMGATE_RELIABILITY_REPORT` names a JSON-lines file that gets one line per test.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.figures import Figure


@pytest.fixture
def figure(record_property: Callable[[str, object], None]) -> Figure:
    """Return a recorder of the scenario, what was checked, and the figures of this test."""

    def record(*, scenario: str, checked: str, **figures: object) -> None:
        record_property("scenario", scenario)
        record_property("checked", checked)
        record_property("figures", figures)

    return record


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Append the test's outcome and figures to the report file, if one is asked for."""
    target = os.environ.get("LOOMGATE_RELIABILITY_REPORT")
    if not target or not (report.when == "call" or report.failed):
        return
    properties = dict(report.user_properties)
    line = {
        "test": report.nodeid,
        "outcome": report.outcome,
        "seconds": round(report.duration, 2),
        "scenario": properties.get("scenario"),
        "checked": properties.get("checked"),
        "figures": properties.get("figures", {}),
    }
    with Path(target).open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
