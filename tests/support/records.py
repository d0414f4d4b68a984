"""Record stores of kernels for tests that need records without a kernel process."""

from __future__ import annotations

from pathlib import Path

from loomgate.gateway.records.store import RecordStore
from loomgate.gateway.records.stored_meta import KernelStart
from loomgate.shared.wire import Sandbox


def kernel_store(
    directory: Path,
    *,
    kernel_id: str = "k",
    name: str | None = None,
    kernel_spec: str | None = None,
    cwd: str | None = None,
    sandbox: Sandbox | None = None,
) -> RecordStore:
    """Return a new store in `directory` of a persistent kernel loomgate started."""
    start = KernelStart(
        id=kernel_id,
        name=name,
        lifetime="persistent",
        kernel_spec=kernel_spec,
        cwd=cwd,
        attached=None,
        sandbox=sandbox,
    )
    return RecordStore.create(directory, start)
