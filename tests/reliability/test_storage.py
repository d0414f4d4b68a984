"""Faults of the disk: a full state dir and a read-only one; clear errors, no record harmed."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from loomgate.translator.mcp_server.server import build_server
from loomgate.translator.mcp_server.settings import Settings
from tests.support.figures import Figure
from tests.support.gateways import GatewayProcess, gateway_with_token
from tests.support.mcp_clients import text
from tests.support.mounts import PrivateDisk

KERNELS = "/api/loomgate/kernels"
# 6 MB in steps, so that the gateway has flushed part of it when the disk fills up.
BIG_CELL = (
    "import sys, time\n"
    "for step in range(0, 200_000, 2000):\n"
    "    print('\\n'.join(f'filling the disk, line {i}' for i in range(step, step + 2000)))\n"
    "    sys.stdout.flush()\n"
    "    time.sleep(0.05)"
)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[PrivateDisk]:
    """A 4 MiB tmpfs of the test's own, where a gateway keeps its records (gone afterwards).

    Only the records live on it: kernels keep their output files (beside their connection
    files) open for writing, and a remount to read-only refuses a filesystem in that state.
    """
    private = PrivateDisk(tmp_path / "state" / "kernels", "4m").start()
    try:
        yield private
    finally:
        private.stop()


def gateway_on(disk: PrivateDisk, token: str) -> GatewayProcess:
    """Return a (not yet started) gateway whose records are on the private tmpfs."""
    return gateway_with_token(disk.path.parent, token, launcher=disk.launcher, root=disk.root)


@pytest.fixture
def token() -> str:
    """A fixed token, so that a restarted gateway accepts the same clients."""
    return secrets.token_urlsafe(24)


@pytest.fixture
def disk_gateway(disk: PrivateDisk, token: str) -> Iterator[GatewayProcess]:
    """A gateway keeping its records on the private tmpfs."""
    process = gateway_on(disk, token).start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def client(disk_gateway: GatewayProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of that gateway."""
    async with httpx.AsyncClient(
        base_url=disk_gateway.url, headers=disk_gateway.headers, timeout=120
    ) as c:
        yield c


async def run(client: httpx.AsyncClient, code: str) -> httpx.Response:
    """Submit `code` to the kernel `disk` and wait for its end."""
    return await client.post(f"{KERNELS}/disk/executions", json={"code": code, "wait": 120})


async def snapshot(client: httpx.AsyncClient, numbers: range) -> dict[int, Any]:
    """Return the summary and all combined lines of each execution in `numbers`."""
    found = {}
    for n in numbers:
        summary = (await client.get(f"{KERNELS}/disk/executions/{n}")).json()["execution"]
        read = await client.get(f"{KERNELS}/disk/executions/{n}/streams/combined")
        assert read.status_code == 200, read.text
        lines = read.json()["lines"]  # the first 10,000 (one response's most)
        found[n] = (summary["state"], summary["code"], summary["unstored"], lines)
    return found


async def write_records(client: httpx.AsyncClient, count: int) -> dict[int, Any]:
    """Create the kernel `disk` with `count` finished records; return their snapshot."""
    r = await client.post(KERNELS, json={"name": "disk"})
    assert r.status_code == 201, r.text
    for i in range(count):
        r = await run(client, f"for j in range(50): print('kept {i}', j)")
        assert r.json()["execution"]["state"] == "completed", r.text
    return await snapshot(client, range(1, count + 1))


async def translator_reply(gateway: GatewayProcess, code: str) -> tuple[bool, str]:
    """Return (is_error, text) of run_cell through an in-memory translator on kernel `disk`."""
    settings = Settings(
        gateway=gateway.url,
        autostart=False,
        kernel="disk",
        env={"LOOMGATE_TOKEN": gateway.token},
    )
    async with Client(build_server(settings)) as mcp:
        result = await mcp.call_tool("run_cell", {"code": code, "wait_seconds": 60})
        return bool(result.is_error), text(result)


async def test_full_disk(
    disk: PrivateDisk,
    disk_gateway: GatewayProcess,
    client: httpx.AsyncClient,
    token: str,
    figure: Figure,
) -> None:
    before = await write_records(client, 3)
    fillers = [disk.fill("filler-1", leave=1 << 20)]  # the next cell fills the rest

    # A cell that was accepted runs to its end; the record says from where output was lost.
    filled = (await run(client, BIG_CELL)).json()["execution"]
    assert filled["state"] == "completed"
    assert filled["unstored"]["reason"] == "No space left on device"
    kept_lines = filled["unstored"]["from_line"] - 1
    assert kept_lines > 0, "part of the cell was stored before the disk filled"

    # Later cells are refused, with the reason, and nothing runs.
    fillers.append(disk.fill("filler-2"))  # what the cell's rollback freed
    refused = await run(client, "print('not run')")
    assert refused.status_code == 507
    assert refused.json()["error"] == "storage_failed"
    assert "No space left on device" in refused.json()["message"]
    is_error, reply = await translator_reply(disk_gateway, "print('not run either')")
    assert is_error and "cannot store records" in reply and "No space left" in reply, reply
    assert token not in reply
    created = await client.post(KERNELS, json={"name": "another"})
    assert created.status_code == 507, created.text

    assert await snapshot(client, range(1, 4)) == before

    # Space again: cells run and are stored; the numbering goes on.
    for filler in fillers:
        filler.unlink()
    again = (await run(client, "print('space again')")).json()["execution"]
    assert (again["number"], again["state"], again["unstored"]) == (5, "completed", None)

    # Everything on disk is whole: a restarted gateway reads the same records.
    disk_gateway.stop()
    restarted = gateway_on(disk, token).start()
    try:
        async with httpx.AsyncClient(
            base_url=restarted.url, headers=restarted.headers, timeout=60
        ) as fresh:
            assert await snapshot(fresh, range(1, 4)) == before
            [(state, _, unstored, lines)] = (await snapshot(fresh, range(4, 5))).values()
            assert state == "completed" and unstored == filled["unstored"]
            assert len(lines) == min(kept_lines, 10_000)  # one read's most
            assert [line["text"] for line in lines] == [
                f"filling the disk, line {i}" for i in range(len(lines))
            ]
            end = await fresh.get(
                f"{KERNELS}/disk/executions/4/streams/combined", params={"lines": "-1:"}
            )
            assert end.json()["total"] == kept_lines
            assert end.json()["lines"][0]["text"] == f"filling the disk, line {kept_lines - 1}"
            [(_, _, _, last)] = (await snapshot(fresh, range(5, 6))).values()
            assert [line["text"] for line in last] == ["space again"]
    finally:
        restarted.stop()
    figure(
        scenario="fault: full disk (4 MiB tmpfs)",
        checked="the running cell ends normally and says from which line output was not "
        "stored; new cells are refused with 507 and the reason; earlier records unchanged, "
        "also after a gateway restart; works again once space is freed",
        records_checked=5,
        lines_stored_before_the_disk_filled=kept_lines,
    )


async def test_read_only_state_dir(
    disk: PrivateDisk,
    disk_gateway: GatewayProcess,
    client: httpx.AsyncClient,
    token: str,
    figure: Figure,
) -> None:
    before = await write_records(client, 2)
    disk.remount("ro")
    try:
        response = await run(client, "print('ran unrecorded')")
        assert response.status_code == 201, response.text
        ran = response.json()["execution"]
        assert ran["state"] == "completed"
        assert ran["unstored"]["reason"] == "Read-only file system"
        refused = await run(client, "print('not run')")
        assert refused.status_code == 507, refused.text
        assert "Read-only file system" in refused.json()["message"]
        assert await snapshot(client, range(1, 3)) == before
    finally:
        disk.remount("rw")
    again = (await run(client, "print('writable again')")).json()["execution"]
    assert (again["number"], again["unstored"]) == (4, None)

    # A gateway does not start on a state dir it cannot write, and says why.
    disk_gateway.stop()
    disk.remount("ro")
    try:
        blocked = gateway_on(disk, token)
        with pytest.raises(RuntimeError, match="exited with 2"):
            blocked.start()
        stderr = (disk.path.parent.parent / "state.stderr").read_text()
        assert "the state dir" in stderr and "Read-only file system" in stderr
        assert "Traceback" not in stderr.split("loomgate-gateway: the state dir")[-1]
    finally:
        disk.remount("rw")
    figure(
        scenario="fault: state dir turns read-only",
        checked="the running cell ends normally, marked unstored; new cells get 507 with the "
        "reason; earlier records unchanged; writable again → works; a gateway refuses to "
        "start on a read-only state dir with a one-line reason",
        records_checked=3,
    )


def test_unwritable_state_dir_at_start(tmp_path: Path, figure: Figure) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = subprocess.run(
        [sys.executable, "-m", "loomgate.gateway", "--state-dir", str(blocker / "state")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().startswith("loomgate-gateway: the state dir")
    assert "Not a directory" in done.stderr and "Traceback" not in done.stderr
    figure(
        scenario="fault: state dir that cannot be created",
        checked="the gateway exits with status 2 and one line naming the dir and the reason",
    )
