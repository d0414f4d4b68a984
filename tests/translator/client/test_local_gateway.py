"""Connecting: the local gateway started as a detached daemon (once), and remote targets."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loomgate.shared.paths import GatewayFile, read_gateway_file, write_gateway_file
from loomgate.translator.client.connection import open_client
from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.local_gateway import daemon_environment, open_local_client
from loomgate.translator.client.target import GatewayTarget
from tests.support.gateways import (
    STOP_TIMEOUT,
    GatewayProcess,
    alive,
    free_port,
    stop_local_gateway,
    wait_gone,
)


def local_target(port: int) -> GatewayTarget:
    """Return the local default target, on `port`."""
    return GatewayTarget(f"http://127.0.0.1:{port}", None, True, None, True)


def daemons_of(directory: Path) -> set[int]:
    """Return the pids of gateway processes started with `--state-dir directory`."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"loomgate.gateway" in argv and str(directory).encode() in argv:
            found.add(int(entry.name))
    return found


def stop_daemons(directory: Path) -> None:
    """Stop the gateway using `directory` with its kernels; check that no gateway is left."""
    stop_local_gateway(directory)
    left = wait_gone(daemons_of(directory), STOP_TIMEOUT)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"gateways did not stop: {sorted(left)}"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state dir of the test's own (also in the environment); its gateways stop afterwards."""
    directory = tmp_path / "state"
    monkeypatch.setenv("LOOMGATE_STATE_DIR", str(directory))
    try:
        yield directory
    finally:
        stop_daemons(directory)


def parent_of(pid: int) -> int:
    """Return the parent pid of `pid`."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


async def test_autostarted_gateway_outlives_its_starter_and_is_reused(state: Path) -> None:
    port = free_port()
    starter = (
        "import asyncio, sys\n"
        "from loomgate.translator.client.local_gateway import open_local_client\n"
        "from loomgate.translator.client.target import GatewayTarget\n"
        "async def main():\n"
        f"    target = GatewayTarget('http://127.0.0.1:{port}', None, True, None, True)\n"
        "    client = await open_local_client(target, autostart=True)\n"
        "    print((await client.info())['pid'])\n"
        "    await client.aclose()\n"
        "asyncio.run(main())\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", starter, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, err.decode()
    pid = int(out)
    info = read_gateway_file(state)
    assert info is not None and info["pid"] == pid
    assert info["url"] == f"http://127.0.0.1:{port}"
    assert alive(pid), "the gateway died with the translator that started it"
    assert parent_of(pid) not in (os.getpid(), proc.pid)
    assert os.getsid(pid) == pid
    assert os.getpgid(pid) != os.getpgid(0)
    assert (state / "gateway.stdout.log").stat().st_mode & 0o077 == 0

    client = await open_local_client(local_target(port), autostart=True)
    async with client:
        assert client.local and client.label == "local"
        assert (await client.info())["pid"] == pid
    assert daemons_of(state) == {pid}


async def test_concurrent_connects_start_one_gateway(state: Path) -> None:
    target = local_target(free_port())
    clients = await asyncio.gather(*(open_local_client(target, autostart=True) for _ in range(3)))
    try:
        pids = {(await client.info())["pid"] for client in clients}
    finally:
        for client in clients:
            await client.aclose()
    assert len(pids) == 1
    assert daemons_of(state) == pids
    assert (state / "gateway.stdout.log").read_text().count("listening on") == 1


async def test_stale_gateway_file_is_replaced(state: Path) -> None:
    dead = free_port()
    url = f"http://127.0.0.1:{dead}"
    write_gateway_file(state, GatewayFile(url=url, token="old", pid=999999999, version=""))
    target = local_target(free_port())
    async with await open_local_client(target, autostart=True) as client:
        assert client.url == target.url
        pid = (await client.info())["pid"]
    info = read_gateway_file(state)
    assert info is not None and info["pid"] == pid


async def test_no_autostart_when_down(state: Path) -> None:
    port = free_port()
    with pytest.raises(GatewayError) as down:
        await open_local_client(local_target(port), autostart=False)
    assert down.value.code == "unreachable"
    assert "loomgate-gateway" in str(down.value) and "--no-autostart" in str(down.value)
    assert not daemons_of(state)
    with pytest.raises(GatewayError) as again:
        await open_client(local_target(port), autostart=False)
    assert again.value.code == "unreachable"


async def test_gateway_that_cannot_start_is_reported(state: Path) -> None:
    # Bound but not listening: the probe finds nothing there, the gateway cannot bind it.
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    taken = holder.getsockname()[1]
    try:
        with pytest.raises(GatewayError) as failed:
            await open_local_client(local_target(taken), autostart=True, timeout=30)
    finally:
        holder.close()
    assert failed.value.code == "unreachable"
    assert str(failed.value).startswith(
        f"the local gateway exited while starting (the Jupyter server could not be started "
        f"because port {taken} is not available); see {state}"
    )
    assert daemons_of(state) == set()


async def test_connect_to_remote_targets(gateway: GatewayProcess, tmp_path: Path) -> None:
    with_token = GatewayTarget(gateway.url, gateway.token, True, "lab", False)
    async with await open_client(with_token, autostart=True) as client:
        assert client.label == "lab" and not client.local
        assert (await client.info())["service"] == "loomgate"

    without = GatewayTarget(gateway.url, None, True, None, False)
    async with await open_client(without, autostart=True, state_dir=gateway.state_dir) as client:
        assert (await client.info())["service"] == "loomgate"
    with pytest.raises(GatewayError) as no_token:
        await open_client(without, autostart=True, state_dir=tmp_path)
    assert no_token.value.code == "auth"
    assert "LOOMGATE_TOKEN" in str(no_token.value)

    wrong = GatewayTarget(gateway.url, "wrong", True, "lab", False)
    with pytest.raises(GatewayError) as refused:
        await open_client(wrong, autostart=True)
    assert refused.value.code == "auth"


# What Jupyter and ipykernel themselves set in every kernel's environment (TERM=xterm-color).
KERNEL_OWN = frozenset(
    {"CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "GIT_PAGER", "MPLBACKEND", "PAGER", "TERM"}
    | {"PYDEVD_USE_FRAME_EVAL", "JUPYTER_RUNTIME_DIR"}
    # Its own packages dir for pip (sandbox/confinement/packages.py)
    | {"PIP_TARGET", "PIP_UPGRADE", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_ROOT_USER_ACTION"}
    # Its malloc asking for huge pages, which make its copies faster (residency/kernel_command.py)
    | {"GLIBC_TUNABLES"}
)
# Passed on with the kernel's own dirs in front: its packages dir, its `pip` commands.
PREFIXED = frozenset({"PATH", "PYTHONPATH"})
PASSED = {
    "LANG": "C.UTF-8",
    "TZ": "Europe/Lisbon",
    "PYTHONPATH": "/nonexistent/loomgate-test",
    "LC_TIME": "C",
    "XDG_DATA_DIRS": "/nonexistent/share",
    "JUPYTER_PLATFORM_DIRS": "1",
    "CONDA_DEFAULT_ENV": "base-test",
    "UV_CACHE_DIR": "/nonexistent/uv",
    "OPENBLAS_CORETYPE": "Haswell",
    "LOOMGATE_SANDBOX_MECHANISM": "auto",
}
KEPT_OUT = {
    "OPENAI_API_KEY": "sk-do-not-ship",
    "AWS_SECRET_ACCESS_KEY": "do-not-ship",
    "LOOMGATE_TOKEN": "do-not-ship",
    "LOOMGATE_URL": "http://127.0.0.1:1",
    "GITHUB_TOKEN": "do-not-ship",
    "MY_LC_SETTING": "lookalike",  # an allowed prefix, but not at the start
    "XDGX": "lookalike",
    "PYTHONSTARTUP": "/nonexistent/startup.py",
    "UV_INDEX_URL": "https://user:do-not-ship@index.example/simple",  # a passed name
}


async def test_autostarted_gateway_passes_exactly_the_allowlist(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {**PASSED, **KEPT_OUT}.items():
        monkeypatch.setenv(key, value)
    client = await open_local_client(local_target(free_port()), autostart=True)
    try:
        kernel = (await client.create_kernel())["kernel"]
        code = "import os, json\nprint(json.dumps(dict(os.environ)))"
        response = await client.submit(kernel["id"], code, wait=60, head=5)
        seen = json.loads(response["execution"]["output"]["head"][0]["text"])
    finally:
        await client.aclose()
    allowed = daemon_environment(os.environ)
    # A kernel imports first from its own packages dir (`%pip install`'s), then as passed.
    own, _, passed_on = seen["PYTHONPATH"].partition(os.pathsep)
    assert own.endswith("/packages")
    assert {key: seen.get(key) for key in PASSED} == {
        **PASSED,
        "PYTHONPATH": own + os.pathsep + passed_on,
    }
    assert passed_on == PASSED["PYTHONPATH"]
    assert not set(KEPT_OUT) & set(seen)
    assert set(seen) - set(allowed) <= KERNEL_OWN, "beyond the allowlist"
    unchanged = {key for key in allowed if key not in KERNEL_OWN | PREFIXED}
    assert {key: seen.get(key) for key in unchanged} == {key: allowed[key] for key in unchanged}
    for key in PREFIXED & set(allowed):
        assert seen[key].endswith(os.pathsep + allowed[key]), (key, seen[key])


async def test_a_port_held_by_another_program_fails_at_once(state: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        started = time.monotonic()
        with pytest.raises(GatewayError) as held:
            await open_local_client(local_target(port), autostart=True)
        assert time.monotonic() - started < 5  # no gateway started, nothing waited for
        assert str(held.value) == (
            f"port {port} on 127.0.0.1 is held by another program (not the local gateway); "
            "start the gateway on a free port with `loomgate gateway start --port N`: "
            "loomgate-mcp and loomgate find it there through gateway.json"
        )
        assert daemons_of(state) == set()
    finally:
        holder.close()
