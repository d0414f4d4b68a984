"""A kernel's checkpoints in words (presentation/checkpoints.py), table-tested."""

from __future__ import annotations

import pytest

from loomgate.shared import wire
from loomgate.translator.presentation.checkpoints import checkpoint_lines, fork_lines
from loomgate.translator.presentation.kernels import render_kernel
from tests.support.wire_values import kernel

NOW = 1_800_000_000.0
CLEAN = wire.Checkpoint(name="clean", after=3, created=NOW - 90, held=5 * 2**20)
FRESH = wire.Checkpoint(name="after-4", after=4, created=NOW - 2, held=None)
# Taken by a gateway whose clock was ahead (or stepped back since): never a negative age.
AHEAD = wire.Checkpoint(name="ahead", after=1, created=NOW + 5, held=0)


@pytest.mark.parametrize(
    ("checkpoints", "expected"),
    [
        ([], []),
        (
            [CLEAN, FRESH],
            [
                "checkpoints: clean (the state after In [3], 1 min 30 s ago, holds 5 MiB); "
                "after-4 (the state after In [4], 2.0 s ago)"
            ],
        ),
        ([AHEAD], ["checkpoints: ahead (the state after In [1], 0 ms ago, holds 0 bytes)"]),
    ],
)
def test_a_kernels_checkpoints_in_its_status(
    checkpoints: list[wire.Checkpoint], expected: list[str]
) -> None:
    assert checkpoint_lines(checkpoints, NOW) == expected
    lines = render_kernel(kernel(checkpoints=checkpoints), gateway="g").splitlines()
    assert len([line for line in lines if line.startswith("checkpoints: ")]) == len(expected)


def test_a_status_from_a_gateway_before_checkpoints_has_none() -> None:
    said = kernel()
    del said["checkpoints"]  # type: ignore[misc]
    assert "checkpoints" not in render_kernel(said, gateway="g")


def test_a_fork_says_what_it_copied() -> None:
    origin = wire.ForkedFrom(
        kernel="3f2a9c1e-aa", name=None, checkpoint="clean", after=3, lacks=["threads ['t'] run"]
    )
    assert fork_lines(kernel(forked_from=origin)) == [
        "It starts as a copy of kernel 3f2a9c1e: its checkpoint clean after In [3] (that kernel "
        "is untouched); its own cells are numbered from In [1].",
        "Not in it: threads ['t'] run.",
    ]
    live = wire.ForkedFrom(kernel="3f2a9c1e-aa", name="k", checkpoint=None, after=7, lacks=[])
    assert fork_lines(kernel(forked_from=live)) == [
        "It starts as a copy of kernel k: its state after In [7] (that kernel is untouched); its "
        "own cells are numbered from In [1]."
    ]
    older = dict(live)
    del older["lacks"]  # from a gateway before forks named what they lack
    assert fork_lines(kernel(forked_from=older)) == fork_lines(kernel(forked_from=live))  # type: ignore[arg-type]
    assert fork_lines(kernel(forked_from=None)) == []
