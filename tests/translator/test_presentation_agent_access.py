"""Which kernels a model may use, in words (presentation/agent_access.py), table-tested."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.translator.presentation import closed_to_agents_refusal, opened_line
from loomgate.translator.presentation.agent_access import closed_line, closed_note
from loomgate.translator.presentation.kernels import render_kernel, render_kernels
from tests.support.wire_values import kernel


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"open_to_agents": False}, ["open to agents: no (`loomgate agents open lab`)"]),
        (
            {"open_to_agents": False, "name": None},
            ["open to agents: no (`loomgate agents open cccccccc`)"],
        ),
        ({"open_to_agents": True}, []),
    ],
    ids=["closed", "closed, unnamed", "open"],
)
def test_a_closed_kernels_status_says_so(fields: dict[str, Any], expected: list[str]) -> None:
    assert closed_line(kernel(**fields)) == expected
    lines = render_kernel(kernel(**fields), gateway="g").splitlines()
    assert [line for line in lines if line.startswith("open to agents")] == expected


def test_a_kernel_from_a_gateway_that_does_not_say_is_not_called_closed() -> None:
    said = kernel()
    del said["open_to_agents"]  # type: ignore[misc]
    assert closed_line(said) == [] and closed_note([said]) == []


def test_the_table_names_the_live_kernels_closed_to_agents() -> None:
    kernels = [
        kernel(name="a", open_to_agents=False),
        kernel(name="b", open_to_agents=True),
        kernel(name="c", open_to_agents=False, alive=False, state="gone"),
        kernel(name="d", open_to_agents=False),
    ]
    note = "not open to agents: a, d (only the person opens one: `loomgate agents open KERNEL`)"
    assert closed_note(kernels) == [note]
    assert render_kernels(kernels, None, "g").splitlines()[-1] == note
    assert closed_note([kernel(open_to_agents=True)]) == []


@pytest.mark.parametrize(
    ("opened", "expected"),
    [
        (True, "kernel lab is open to agents: a model may use it whatever its sandbox"),
        (False, "kernel lab is closed to agents"),
    ],
)
def test_opening_says_what_it_did(opened: bool, expected: str) -> None:
    assert opened_line(kernel(open_to_agents=opened)) == expected


@pytest.mark.parametrize(
    ("details", "runs"),
    [
        (
            {"kernel": "k", "profile": "none", "default": "workspace"},
            "runs under the sandbox profile none, looser than this gateway's default (workspace)",
        ),
        ({"kernel": "k", "profile": None, "default": "strict"}, "is not sandboxed by loomgate"),
    ],
)
def test_the_models_refusal_names_the_kernel_and_who_opens_it(
    details: dict[str, object], runs: str
) -> None:
    assert closed_to_agents_refusal(details) == (
        f"Kernel k {runs}, so a model may not use it; only the person opens it to agents "
        '(`loomgate agents open k`). connect(kernel="a-new-name") starts a kernel of your own.'
    )


def test_a_kernel_from_a_gateway_that_does_not_say_is_not_called_open() -> None:
    said = kernel()
    del said["open_to_agents"]  # type: ignore[misc]
    assert opened_line(said) == "kernel lab is closed to agents"
