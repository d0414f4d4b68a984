"""How the gateway reaches a local kernel: the transport each kernel spec gets, a relayed
kernel's own connection file and the relay's routes."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from loomgate.gateway.residency import kernel_transport
from loomgate.gateway.residency.kernel_transport import RELAYED_PORTS
from loomgate.gateway.sandbox.network.kernel_network import BRIDGE_PORT

IPYKERNEL = ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"]
IPYMINI = ["python", "-Xfrozen_modules=off", "-m", "ipymini", "-f", "{connection_file}"]
DENO = ["deno", "jupyter", "--kernel", "--conn", "{connection_file}"]


@pytest.mark.parametrize(
    ("argv", "own_network", "transport"),
    [
        (IPYKERNEL, False, "ipc"),
        (IPYKERNEL, True, "ipc"),
        (IPYMINI, False, "tcp"),
        (IPYMINI, True, "relayed"),
        (DENO, False, "tcp"),
        (DENO, True, "relayed"),
        ([], False, "tcp"),
    ],
)
def test_a_kernel_gets_the_transport_it_takes(
    argv: list[str], own_network: bool, transport: str
) -> None:
    assert kernel_transport.choose(argv, own_network=own_network) == transport


def test_the_relayed_ports_are_a_namespaces_own_and_no_connection_takes_them() -> None:
    ports = list(RELAYED_PORTS.values())
    assert len(set(ports)) == 5 and BRIDGE_PORT not in ports
    # A connection's own port comes from the ephemeral range: the relay's, made while the kernel
    # starts, must never take the port the kernel is about to bind.
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert max(ports) < low


def manager(tmp_path: Path) -> KernelManager:
    """Return a kernel manager whose connection file goes in `tmp_path`."""
    return KernelManager(connection_file=str(tmp_path / "kernel-k.json"))


def test_a_relayed_kernel_reads_its_own_ports_with_the_gateways_key(tmp_path: Path) -> None:
    km = manager(tmp_path)
    kernel_transport.prepare(km, "relayed", str(tmp_path / "ipc" / "k"))
    km.write_connection_file()
    own = kernel_transport.write_relayed_connection(km, tmp_path)
    assert stat.S_IMODE(own.stat().st_mode) == 0o600
    gateway_side = json.loads(Path(km.connection_file).read_text())
    kernel_side = json.loads(own.read_text())
    assert gateway_side["transport"] == "ipc"
    assert (kernel_side["transport"], kernel_side["ip"]) == ("tcp", "127.0.0.1")
    assert kernel_side["key"] == gateway_side["key"]
    assert kernel_side["signature_scheme"] == gateway_side["signature_scheme"]
    assert {k: kernel_side[f"{k}_port"] for k in RELAYED_PORTS} == RELAYED_PORTS
    routes = dict(kernel_transport.relay_routes(km))
    assert routes == {
        Path(f"{tmp_path / 'ipc' / 'k'}-{gateway_side[f'{channel}_port']}"): port
        for channel, port in RELAYED_PORTS.items()
    }


def test_a_restart_keeps_the_ipc_files_and_a_tcp_kernel_gets_ports(tmp_path: Path) -> None:
    km = manager(tmp_path)
    prefix = str(tmp_path / "ipc" / "k")
    kernel_transport.prepare(km, "ipc", prefix)
    km.write_connection_file()
    files = kernel_transport.kernel_ports(km)
    kernel_transport.prepare(km, "ipc", prefix)  # a restart: the same files
    assert kernel_transport.kernel_ports(km) == files
    kernel_transport.prepare(km, "tcp", "")  # another transport: fresh ports
    assert (km.transport, km.ip, kernel_transport.kernel_ports(km)) == (
        "tcp",
        "127.0.0.1",
        (0,) * 5,
    )


def test_ipc_files_are_numbered_apart_and_move_with_their_prefix(tmp_path: Path) -> None:
    km = manager(tmp_path)
    kernel_transport.prepare(km, "ipc", str(tmp_path / "a" / "k"))
    assert km.cache_ports is False  # files, not ports another process could take
    km.write_connection_file()
    assert len(set(kernel_transport.kernel_ports(km))) == 5
    kernel_transport.prepare(km, "ipc", str(tmp_path / "b" / "k"))  # a dir of its own now
    assert (km.ip, kernel_transport.kernel_ports(km)) == (str(tmp_path / "b" / "k"), (0,) * 5)


def test_a_tcp_kernels_restart_keeps_its_ports(tmp_path: Path) -> None:
    km = manager(tmp_path)
    kernel_transport.prepare(km, "tcp", "")
    km.write_connection_file()
    ports = kernel_transport.kernel_ports(km)
    assert 0 not in ports
    kernel_transport.prepare(km, "tcp", "")  # a restart: a client's connection expects them
    assert kernel_transport.kernel_ports(km) == ports
