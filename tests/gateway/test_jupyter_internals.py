"""The jupyter_client/jupyter_server private names the gateway uses: still there, still used."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from loomgate.gateway.jupyter_internals import PRIVATE_USES, HookedKernelManager, PrivateUse
from tests.support.privates import foreign_private_uses

GATEWAY = Path(inspect.getfile(HookedKernelManager)).parent


@pytest.mark.parametrize("use", PRIVATE_USES, ids=lambda use: use.name)
def test_private_name_still_exists(use: PrivateUse) -> None:
    where = f"{use.owner.__module__}.{use.owner.__qualname__}.{use.name}"
    if not use.read_by:
        assert callable(getattr(use.owner, use.name, None)), (
            f"{where} is gone; loomgate used it because {use.why}"
        )
    for reader in use.read_by:
        assert f".{use.name}" in inspect.getsource(reader), (
            f"{reader.__qualname__} no longer reads {where}; loomgate set it because {use.why}"
        )


@pytest.mark.parametrize(
    ("caller", "callee"),
    [
        ("_async_start_kernel", "_async_post_start_kernel"),
        ("_async_restart_kernel", "_async_post_start_kernel"),
        ("_async_restart_kernel", "_async_shutdown_kernel"),
    ],
)
def test_jupyter_client_still_reaches_the_hooks_through_them(caller: str, callee: str) -> None:
    # restart_kernel starts the new process through _async_start_kernel.
    source = inspect.getsource(getattr(KernelManager, caller))
    reached = {callee, "_async_start_kernel"} if caller == "_async_restart_kernel" else {callee}
    assert any(f"self.{name}(" in source for name in reached), f"{caller} no longer calls {callee}"


def test_no_other_module_reaches_into_jupyter_privates() -> None:
    offenders = foreign_private_uses(GATEWAY, "jupyter_internals.py")
    assert not offenders, offenders
