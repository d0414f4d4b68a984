"""A gateway's IPython kernels keep IPython's history in memory: the person's history file is
never touched, so many kernels never race for it (and never print its errors into a cell)."""

from __future__ import annotations

from pathlib import Path

import pytest

from loomgate.gateway.residency.kernel_command import (
    LAUNCHER,
    copyable,
    runs_ipykernel,
    with_huge_pages,
)
from tests.support.cells import submit
from tests.support.gateways import GatewayProcess, client

API = "/api/loomgate/kernels"
HISTORY = (
    "hm = get_ipython().history_manager\n"
    "print(hm.hist_file, [source for _, _, source in hm.get_tail(2, include_latest=True)])"
)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"], True),
        (["/usr/bin/python3", "-Xfrozen_modules=off", "-m", "ipykernel", "-f", "c"], True),
        (["python", "-m", "ipykernel_launcher_other", "-f", "c"], False),
        (["ipykernel_launcher", "-m"], False),
        (["R", "--slave", "-e", "IRkernel::main()", "--args", "{connection_file}"], False),
        ([], False),
    ],
)
def test_which_kernel_specs_run_ipykernel(argv: list[str], expected: bool) -> None:
    assert runs_ipykernel(argv) is expected


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        (["py", "-m", "ipykernel_launcher", "-f", "c"], ["py", str(LAUNCHER), "-f", "c"]),
        (
            ["py", "-X", "a", "-m", "ipykernel", "-f", "c"],
            ["py", "-X", "a", str(LAUNCHER), "-f", "c"],
        ),
        (["py", "-m", "ipykernel_launcher_other", "-f", "c"], None),
        (["sh", "-c", "exec py -m ipykernel_launcher"], None),
        (["R", "-e", "IRkernel::main()", "--args", "c"], None),
        ([], None),
    ],
)
def test_an_ipykernel_runs_under_the_copy_launcher(
    cmd: list[str], expected: list[str] | None
) -> None:
    assert copyable(cmd) == (cmd if expected is None else expected)


@pytest.mark.parametrize(
    ("tunables", "expected"),
    [
        (None, "glibc.malloc.hugetlb=1"),
        ("", "glibc.malloc.hugetlb=1"),
        ("glibc.malloc.arena_max=2", "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"),
        ("glibc.malloc.hugetlb=0", "glibc.malloc.hugetlb=0"),  # the person's own choice stays
    ],
)
def test_a_copyable_kernels_malloc_asks_for_huge_pages(tunables: str | None, expected: str) -> None:
    env = {"PATH": "/bin"} | ({"GLIBC_TUNABLES": tunables} if tunables is not None else {})
    assert with_huge_pages(env) == {"PATH": "/bin", "GLIBC_TUNABLES": expected}


async def test_a_gateway_kernel_keeps_ipython_history_in_memory(tmp_path: Path) -> None:
    ipython_dir = tmp_path / "ipython"
    gateway = GatewayProcess(tmp_path / "state", env={"IPYTHONDIR": str(ipython_dir)}).start()
    try:
        async with client(gateway) as http:
            r = await http.post(API, json={})
            assert r.status_code == 201, r.text
            kernel = r.json()["kernel"]["id"]
            await submit(http, kernel, "x = 6 * 7")
            reply = await submit(http, kernel, HISTORY, head=5)
            lines = [line["text"] for line in reply["execution"]["output"]["head"]]
            # In-memory history still serves the kernel's own session (%history, up-arrow).
            assert lines == [":memory: ['x = 6 * 7', " + repr(HISTORY) + "]"]
    finally:
        gateway.stop()
    assert list(ipython_dir.rglob("history*.sqlite")) == []
