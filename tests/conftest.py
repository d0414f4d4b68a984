"""Fixtures shared by every test (real gateways and kernels, always stopped), and the `process`
marker: tests that start processes get it automatically, so `-m "not process"` runs the rest."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.support import (
    browser,
    contention,
    copyable_kernels,
    gateways,
    imports,
    jupyter_lab,
    sandboxed_gateways,
    terminals,
    translators,
    upstreams,
)
from tests.support.gates import Gate
from tests.support.gateways import GatewayProcess
from tests.support.jupyter_lab import JupyterServerProcess
from tests.support.workers import workers_for

# Fixtures that start processes, and modules whose use in a test module means it starts some.
PROCESS_FIXTURES = frozenset({"gateway", "fresh_gateway", "confined_gateway", "lab", "sandboxed"})
SPAWNING_MODULES = (
    subprocess,
    browser,
    contention,
    copyable_kernels,
    gateways,
    imports,
    jupyter_lab,
    sandboxed_gateways,
    terminals,
    translators,
    upstreams,
)
SPAWNING_NAMES = frozenset(module.__name__ for module in SPAWNING_MODULES)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Return how many workers pyproject.toml's `-n auto` starts (tests/support/workers.py)."""
    return workers_for(config.args, config.invocation_params.dir)


def pytest_configure(config: pytest.Config) -> None:
    """Declare the `process` marker."""
    config.addinivalue_line(
        "markers", "process: starts processes (gateways, kernels, translators); set automatically"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Show, under a failing test, the end of the log of each gateway that logged during it."""
    report = yield
    if report.failed:
        for path, tail in gateways.logs_since(call.start).items():
            report.sections.append((f"gateway log {path.name} ({call.when})", tail))
    return report


def parameter_names(item: pytest.Item) -> set[str]:
    """Return the names `item`'s parametrize marks give values directly (not through a fixture)."""
    names: set[str] = set()
    for mark in item.iter_markers("parametrize"):
        if mark.kwargs.get("indirect", False) is True:
            continue
        argnames = mark.args[0] if mark.args else mark.kwargs["argnames"]
        if isinstance(argnames, str):
            argnames = [name.strip() for name in argnames.split(",")]
        indirect = mark.kwargs.get("indirect", ())
        names |= {name for name in argnames if not (indirect and name in indirect)}
    return names


def starts_processes(item: pytest.Item) -> bool:
    """Return whether `item` uses a process fixture, or lives in a module that spawns."""
    if PROCESS_FIXTURES & (set(getattr(item, "fixturenames", ())) - parameter_names(item)):
        return True
    module: ModuleType | None = getattr(item, "module", None)
    names = vars(module).values() if module is not None else ()
    return any(
        any(value is spawning for spawning in SPAWNING_MODULES)
        or getattr(value, "__module__", None) in SPAWNING_NAMES
        for value in names
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that starts processes `process`."""
    for item in items:
        if starts_processes(item):
            item.add_marker(pytest.mark.process)


@pytest.fixture(autouse=True)
def no_processes_unless_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fail a test that starts a process without the `process` marker (it would be misfiled)."""
    if request.node.get_closest_marker("process") is not None:
        return

    def refuse(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        raise AssertionError(
            f"{request.node.nodeid} starts a process ({args!r}) but is not marked `process`; "
            "use a process fixture or tests.support helpers so it is marked"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


# Kernels of the suite's gateways run unconfined unless a test asks for a profile: a cell's gate
# file, like much of what tests hand to kernels, lies in the host's /tmp, which a sandbox hides.
# tests/gateway/sandbox/ tests the shipped default (workspace) on gateways of their own, and so
# do the residency, crash-window and chaos tests (`confined_gateway`, under /var/tmp).
UNCONFINED = 'default = "none"\n'


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A loomgate config dir for each test holding only sandbox.toml (default profile none; no
    startup.py, inspectors.py or gateways.toml), so a developer's own files never change what a
    test sees; and an XDG_STATE_HOME of its own, so that the list of state dirs every gateway
    notes (sandbox/policy/state_dirs.py) is the test's, not the developer's or other workers'."""
    config = tmp_path / "config" / "loomgate"
    config.mkdir(parents=True)
    (config / "sandbox.toml").write_text(UNCONFINED)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config.parent))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-home"))
    return config


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[JupyterServerProcess]:
    """A running JupyterLab with loomgate's extension enabled; stopped with its kernels."""
    server = JupyterServerProcess(tmp_path / "person")
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def gate(tmp_path: Path) -> Gate:
    """A gate a cell can block on until the test opens it."""
    return Gate(tmp_path)


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """A gateway shared by the session's tests (each test uses its own kernels)."""
    # Prewarmed kernels on: most conversation kernels of the suite are claimed from the pool.
    # Started before any test's own config dir: it gets one of its own (kernels unconfined).
    config = tmp_path_factory.mktemp("gateway-config") / "loomgate"
    config.mkdir()
    (config / "sandbox.toml").write_text(UNCONFINED)
    env = {"XDG_CONFIG_HOME": str(config.parent)}
    process = GatewayProcess(
        tmp_path_factory.mktemp("gateway") / "state", prewarm=1, env=env
    ).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def fresh_gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """A gateway of the test's own, for tests that restart or kill it."""
    process = GatewayProcess(tmp_path / "state")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def confined_root() -> Iterator[Path]:
    """A directory outside the host's /tmp (which a sandbox replaces) for a gateway whose kernels
    are confined: its state, config, its kernels' `project` and what they must see (gates,
    flags); removed afterwards."""
    with sandboxed_gateways.sandbox_root() as root:
        yield root


@pytest.fixture
def confined_gateway(confined_root: Path) -> Iterator[GatewayProcess]:
    """A gateway of the test's own whose kernels get the shipped default profile (workspace),
    its state in `confined_root`, its kernels working in its `project`; stopped with them."""
    process = sandboxed_gateways.confined_gateway(confined_root)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def http(gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for the shared gateway, with its token."""
    async with httpx.AsyncClient(base_url=gateway.url, headers=gateway.headers, timeout=120) as c:
        yield c


@pytest.fixture
async def kernel(http: httpx.AsyncClient) -> AsyncIterator[str]:
    """A fresh kernel on the shared gateway (stopped afterwards); yields its id."""
    r = await http.post("/api/loomgate/kernels", json={})
    assert r.status_code == 201, r.text
    kernel_id = r.json()["kernel"]["id"]
    try:
        yield kernel_id
    finally:
        await http.delete(f"/api/loomgate/kernels/{kernel_id}")
