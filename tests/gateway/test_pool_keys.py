"""Which prewarmed kernel may become the kernel asked for (kernels/pool.py `serves`), and which
will never be claimed again (`outdated`): a table over what a pool key holds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loomgate.gateway.kernels.pool import PoolKey, outdated, serves
from loomgate.gateway.sandbox.policy.profiles import NO_NETWORK, PUBLIC, SandboxRules

RULES = SandboxRules(
    profile="workspace",
    confined=True,
    writable=(Path("/w/project"),),
    hidden=(Path("/h/state"), Path("/h/gone")),
    network=PUBLIC,
    memory=None,
    processes=None,
)
HELD = PoolKey("python3", RULES, "/w/project")
GONE = {Path("/h/gone")}  # what no longer exists


def hiding(*paths: str) -> PoolKey:
    """Return HELD's key hiding `paths` instead."""
    return HELD._replace(sandbox=replace(RULES, hidden=tuple(Path(p) for p in paths)))


@pytest.mark.parametrize(
    ("asked", "serves_it", "outdates_it"),
    [
        (HELD, True, False),
        # A hidden dir gone since the kernel started: it hides what is not there.
        (hiding("/h/state"), True, False),
        # A dir to hide that exists and this kernel sees (a new gateway's state dir).
        (hiding("/h/state", "/h/gone", "/h/new"), False, True),
        # One it hides that exists, no longer asked to be hidden (sandbox.toml edited).
        (hiding("/h/gone"), False, True),
        (HELD._replace(sandbox=replace(RULES, network=NO_NETWORK)), False, True),
        (HELD._replace(sandbox=replace(RULES, profile="strict")), False, False),
        (HELD._replace(kernel_spec="deno"), False, False),
        (HELD._replace(cwd="/w/other"), False, False),
        (HELD._replace(sandbox=None), False, False),
    ],
)
def test_a_pool_kernel_serves_its_key_and_one_hiding_less_of_what_is_gone(
    asked: PoolKey, serves_it: bool, outdates_it: bool
) -> None:
    def exists(path: Path) -> bool:
        return path not in GONE

    assert serves(HELD, asked, exists) is serves_it
    assert serves(asked, asked, exists)
    assert outdated(HELD, asked, exists) is outdates_it


def test_an_unconfined_pool_kernel_serves_its_own_key_alone() -> None:
    unconfined = PoolKey("python3", None, None)
    assert serves(unconfined, unconfined)
    assert not serves(unconfined, HELD) and not serves(HELD, unconfined)
    assert not outdated(unconfined, HELD._replace(cwd=None))
