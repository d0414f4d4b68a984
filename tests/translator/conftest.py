"""Fixtures for translator tests of sandboxes: a real gateway under the shipped default profile,
shared by a module's tests, its kernels stopped after each."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.sandboxed_gateways import SandboxedGateway, sandboxed_gateway


@pytest.fixture(scope="module")
def sandboxed_place() -> Iterator[SandboxedGateway]:
    """A gateway with the shipped default profile, for one module."""
    with sandboxed_gateway() as place:
        yield place


@pytest.fixture
def sandboxed(sandboxed_place: SandboxedGateway) -> Iterator[SandboxedGateway]:
    """The module's sandboxed gateway; the kernels a test started are stopped afterwards."""
    try:
        yield sandboxed_place
    finally:
        sandboxed_place.stop_kernels()
