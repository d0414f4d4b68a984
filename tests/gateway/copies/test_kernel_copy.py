"""A live ipykernel copied by fork() under residency/copy_launcher.py (kernels/kernel_copy.py): the
copy answers on its own connection file with the origin's state, each goes on alone, and a
frozen copy (a checkpoint) makes a live one with its state each time it is continued."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client import BlockingKernelClient, KernelManager

from loomgate.gateway.kernels.kernel_copy import (
    PID,
    checkpoint_cell,
    copy_connection,
    fork_cell,
    write_connection,
)
from loomgate.gateway.process_identity import ProcessIdentity
from loomgate.gateway.residency import copy_launcher
from loomgate.gateway.residency.kernel_family import Frozen, KernelFamily
from loomgate.gateway.residency.kernel_process import children, resident_bytes
from tests.support.copyable_kernels import copyable_kernel

TIMEOUT = 60


@pytest.fixture
def origin(tmp_path: Path) -> Iterator[tuple[KernelManager, BlockingKernelClient]]:
    """A kernel under the copy launcher, on ipc sockets in `tmp_path`; stopped afterwards."""
    with copyable_kernel(tmp_path) as started:
        yield started


def run(kc: BlockingKernelClient, code: str, **content: Any) -> dict[str, Any]:
    """Run `code`; return its reply's content, once its idle has come."""
    msg_id = kc.execute(code, **content)
    answer = kc.get_shell_msg(timeout=TIMEOUT)
    while answer["parent_header"].get("msg_id") != msg_id:  # a kernel_info of wait_for_ready's
        answer = kc.get_shell_msg(timeout=TIMEOUT)
    reply: dict[str, Any] = answer["content"]
    printed = []
    while True:
        msg = kc.get_iopub_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return {**reply, "printed": "".join(printed)}


def value(kc: BlockingKernelClient, expression: str) -> str:
    """Return the repr of `expression` in the kernel."""
    reply = run(kc, "", silent=True, user_expressions={"v": expression})
    assert reply["status"] == "ok", reply
    return str(reply["user_expressions"]["v"]["data"]["text/plain"])


def copied(kc: BlockingKernelClient, code: str) -> int:
    """Run a copying cell; return the pid of the child it forked."""
    reply = run(kc, code, silent=True, user_expressions={PID: PID})
    assert reply["status"] == "ok", reply
    return int(reply["user_expressions"][PID]["data"]["text/plain"])


@contextlib.contextmanager
def copy_at(connection: Path, pids: Callable[[], list[int]]) -> Iterator[BlockingKernelClient]:
    """Yield a client of the copy on `connection` once it is ready; the copy's processes
    (`pids()`, asked at the end) are killed after."""
    kc = BlockingKernelClient()
    kc.load_connection_file(str(connection))
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=TIMEOUT)
        yield kc
    finally:
        kc.stop_channels()
        for pid in pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def connection_of(km: KernelManager, tmp_path: Path, name: str) -> Path:
    """Write the connection file of a copy of `km`'s kernel; return its path."""
    origin = json.loads(Path(km.connection_file).read_text())
    path = tmp_path / f"{name}.json"
    write_connection(copy_connection(origin, tmp_path / name), path)
    return path


def test_a_copy_answers_with_the_origins_state_and_each_goes_on_alone(
    origin: tuple[KernelManager, BlockingKernelClient], tmp_path: Path
) -> None:
    km, kc = origin
    assert run(kc, "x = 41\nbig = bytearray(50_000_000)")["status"] == "ok"
    connection = connection_of(km, tmp_path, "copy")
    pid = copied(kc, fork_cell(connection))
    with copy_at(connection, lambda: [pid]) as copy:
        assert run(copy, "x += 1")["status"] == "ok"
        assert run(copy, "print('from the copy')")["printed"] == "from the copy\n"
        assert run(kc, "print('from the origin')")["printed"] == "from the origin\n"
        assert (value(copy, "x"), value(copy, "len(big)")) == ("42", "50000000")
        assert value(kc, "x") == "41"  # the origin is untouched
    assert value(kc, "x * 2") == "82"  # and lives on after its copy ended


def test_a_copy_outlives_its_origin(tmp_path: Path) -> None:
    with copyable_kernel(tmp_path) as (km, kc):
        assert run(kc, "x = 41")["status"] == "ok"
        connection = connection_of(km, tmp_path, "copy")
        pid = copied(kc, fork_cell(connection))
    with copy_at(connection, lambda: [pid]) as copy:  # the origin was shut down on the way out
        assert not km.is_alive()
        assert run(copy, "x += 1")["status"] == "ok"
        assert value(copy, "x") == "42"


def test_a_checkpoint_makes_a_live_copy_of_its_state_each_time_it_is_continued(
    origin: tuple[KernelManager, BlockingKernelClient], tmp_path: Path
) -> None:
    km, kc = origin
    assert run(kc, "x = 41")["status"] == "ok"
    order = tmp_path / "order"
    checkpoint = copied(kc, checkpoint_cell(order))
    try:
        assert run(kc, "x = 50")["status"] == "ok"  # a cell the agent regrets
        for attempt in range(2):  # the checkpoint stays: a second rollback works
            connection = connection_of(km, tmp_path, f"rollback-{attempt}")
            order.write_text(str(connection))
            os.kill(checkpoint, signal.SIGCONT)
            # The live copy is the checkpoint's child: its pid is told to no one.
            with copy_at(connection, lambda: children(checkpoint)) as copy:
                assert value(copy, "x") == "41"
                assert run(copy, "x = 99")["status"] == "ok"
        assert value(kc, "x") == "50"
    finally:
        for pid in [*children(checkpoint), checkpoint]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_only_a_kernel_reached_over_ipc_is_copied(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="over ipc"):
        copy_connection({"transport": "tcp", "ip": "127.0.0.1"}, tmp_path / "copy")


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        (("127.0.0.1", 8080), "127.0.0.1:8080"),
        (("0.0.0.0", 0), "0.0.0.0:0"),
        (("::ffff:127.0.0.1", 80, 0, 0), "127.0.0.1:80"),  # IPv4, dual-stack
        (("::1", 443, 0, 0), "[::1]:443"),
        (("fe80::1%eth0", 22, 0, 2), "[fe80::1]:22"),  # a link-local address's scope
    ],
)
def test_a_sockets_address_in_words(bound: tuple[Any, ...], expected: str) -> None:
    assert copy_launcher.address(bound) == expected


def test_a_socket_in_words_is_asked_of_its_descriptor_and_left_as_it_was() -> None:
    with contextlib.ExitStack() as stack:
        server = stack.enter_context(socket.create_server(("127.0.0.1", 0)))
        port = server.getsockname()[1]
        client = stack.enter_context(socket.create_connection(("127.0.0.1", port)))
        udp = stack.enter_context(socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
        udp.bind(("::1", 0))
        unbound = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        unix, other_end = socket.socketpair()
        stack.enter_context(unix)
        stack.enter_context(other_end)
        server.setblocking(False)
        assert copy_launcher.socket_words(server.fileno()) == f"tcp listening on 127.0.0.1:{port}"
        mine = client.getsockname()[1]
        connected = f"tcp 127.0.0.1:{mine} to 127.0.0.1:{port}"
        assert copy_launcher.socket_words(client.fileno()) == connected
        assert copy_launcher.socket_words(udp.fileno()) == f"udp6 on [::1]:{udp.getsockname()[1]}"
        assert copy_launcher.socket_words(unbound.fileno()) is None
        assert copy_launcher.socket_words(unix.fileno()) is None
        previous = socket.getdefaulttimeout()
        socket.setdefaulttimeout(5)  # a socket object made on it would set it non-blocking
        try:
            assert copy_launcher.socket_words(client.fileno()) is not None
        finally:
            socket.setdefaulttimeout(previous)
        assert (os.get_blocking(server.fileno()), os.get_blocking(client.fileno())) == (False, True)
        client.sendall(b"still open")  # the descriptor is the caller's still


def test_checkpoints_hold_at_most_their_resident_size(tmp_path: Path) -> None:
    family = KernelFamily()
    assert family.hold_at_most(0)  # none
    me = ProcessIdentity.of(os.getpid())
    assert me is not None
    family.checkpoints["mine"] = Frozen(me, tmp_path / "order")
    resident = resident_bytes(os.getpid())
    assert resident is not None and resident > 0
    assert family.hold_at_most(10 * resident) and not family.hold_at_most(resident // 10)
    gone = ProcessIdentity(pid=2**22 + 1, started="1", boot="gone")  # no such pid
    family.checkpoints["gone"] = Frozen(gone, tmp_path / "order")
    assert not family.hold_at_most(10 * resident)  # not told: measured instead
