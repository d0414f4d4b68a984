"""The jupyter_client/jupyter_server private names the gateway uses: still there, still used."""

from __future__ import annotations

import importlib
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


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        ("loomgate.gateway.jupyter_internals.HookedKernelManager", "shutdown_kernel"),
        ("loomgate.gateway.kernels.manager.LoomMappingKernelManager", "start_kernel"),
        ("loomgate.gateway.kernels.manager.LoomMappingKernelManager", "shutdown_kernel"),
        ("loomgate.gateway.kernels.manager.LoomMappingKernelManager", "shutdown_all"),
        ("loomgate.gateway.upstream.manager.UpstreamMappingKernelManager", "start_kernel"),
        ("loomgate.gateway.upstream.manager.UpstreamKernelManager", "restart_kernel"),
        ("loomgate.gateway.upstream.manager.UpstreamKernelManager", "interrupt_kernel"),
        ("loomgate.gateway.upstream.manager.UpstreamKernelManager", "shutdown_kernel"),
    ],
)
def test_an_async_override_is_the_coroutine_jupyter_awaits(owner: str, name: str) -> None:
    module, _, cls = owner.rpartition(".")
    method = getattr(getattr(importlib.import_module(module), cls), name)
    assert inspect.iscoroutinefunction(method)
    assert method.__qualname__ == f"{cls}.{name}"  # the method itself, not a wrapper
