"""The paths no confined kernel can read, under any profile."""

from __future__ import annotations

from loomgate.gateway.sandbox.policy.always_hidden import ALWAYS_HIDDEN
from loomgate.gateway.sandbox.policy.profiles import written_path_problem


def test_every_always_hidden_path_is_well_formed() -> None:
    assert all(written_path_problem(p) is None for p in ALWAYS_HIDDEN)
    assert all(p.startswith(("~/", "/")) for p in ALWAYS_HIDDEN)
    assert len(set(ALWAYS_HIDDEN)) == len(ALWAYS_HIDDEN)
