"""The person's own Jupyter servers from the shell: `loomgate jupyter enable|disable|status`,
their kernels in `loomgate kernels`, and `--kernel NOTEBOOK` reaching the kernel of a notebook."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import AsyncIterator

from loomgate.translator.cli.errors import UsageError
from loomgate.translator.client.connection import open_client
from loomgate.translator.client.errors import NotFound
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.jupyter_servers import (
    ServerKernels,
    enabled_config,
    find_in_servers,
    is_enabled,
    list_server_kernels,
    live_cells_enabled,
    running_servers,
    set_enabled,
)
from loomgate.translator.client.target import GatewayTarget
from loomgate.translator.presentation import (
    ENABLE_HINT,
    live_cells_line,
    render_jupyter_server,
    several_kernels,
)


class ServerClients:
    """Clients of the person's Jupyter servers, opened on first use; `aclose` closes those not
    taken."""

    def __init__(self) -> None:
        self._opened: dict[str, GatewayClient] = {}

    async def open(self, target: GatewayTarget) -> GatewayClient:
        """Return a checked client of `target`."""
        if target.url not in self._opened:
            client = await open_client(target, autostart=False)
            client.client_label = "cli"
            self._opened[target.url] = client
        return self._opened[target.url]

    def take(self, client: GatewayClient) -> GatewayClient:
        """Return `client`, which `aclose` will now leave open (its caller closes it)."""
        self._opened.pop(client.url, None)
        return client

    async def aclose(self) -> None:
        """Close every client not taken."""
        for client in self._opened.values():
            await client.aclose()
        self._opened.clear()


@contextlib.asynccontextmanager
async def server_clients() -> AsyncIterator[ServerClients]:
    """Yield clients of the person's Jupyter servers, closed afterwards unless taken."""
    clients = ServerClients()
    try:
        yield clients
    finally:
        await clients.aclose()


async def other_servers(listed: GatewayClient) -> list[ServerKernels]:
    """Return the person's running Jupyter servers other than `listed`, with their kernels."""
    servers = running_servers(except_url=listed.url)
    async with server_clients() as clients:
        return await list_server_kernels(servers, clients.open)


def render_others(others: list[ServerKernels]) -> list[str]:
    """Return a section per Jupyter server: its kernels, or how to reach them."""
    return [
        render_jupyter_server(
            o.server.name, o.server.url, o.server.root_dir, o.kernels, None, o.problem
        )
        for o in others
    ]


async def client_with_kernel(
    client: GatewayClient, ref: str | None, gateway_given: bool
) -> GatewayClient:
    """Return `client`, or a client of the Jupyter server whose live kernel `ref` names (a
    notebook path, name or id prefix) when `client`'s gateway runs no such kernel."""
    if ref is None or gateway_given:
        return client
    try:
        if (await client.get_kernel(ref))["alive"]:
            return client
    except NotFound:
        pass
    servers = running_servers(except_url=client.url)
    async with server_clients() as clients:
        found = await find_in_servers(ref, servers, clients.open)
        if len(found) > 1:
            matches = [(c.label, kernel) for c, kernel in found]
            raise UsageError(several_kernels(ref, matches, "person"))
        if not found:
            return client
        chosen = clients.take(found[0][0])
    await client.aclose()
    return chosen


async def jupyter_command(args: argparse.Namespace) -> int:
    """Enable, disable or report loomgate's extension in the person's Jupyter; return 0."""
    if not args.live_cells and args.action != "enable":
        raise UsageError(
            "--no-live-cells goes with enable: loomgate jupyter enable --no-live-cells"
        )
    if args.action in ("enable", "disable"):
        enable = args.action == "enable"
        try:
            written = set_enabled(enable, live_cells=args.live_cells)
        except OSError as e:
            raise UsageError(
                f"cannot write {e.filename} ({e.strerror}), which Jupyter reads before your own "
                f"config; run `jupyter server extension {args.action} loomgate.gateway` as "
                "its owner"
            ) from None
        verb = "enabled" if enable else "disabled"
        print(
            f"loomgate's Jupyter server extension is {verb} in {' and '.join(map(str, written))}."
        )
        restart = "Restart running Jupyter servers for it to take effect"
        if enable:
            print(f"{restart}; loomgate must be installed in the environment that runs them.")
            print(live_cells_line(args.live_cells))
        else:
            print(f"{restart}.")
        return 0
    state = "enabled" if is_enabled() else "not enabled"
    print(f"loomgate's Jupyter server extension: {state} ({enabled_config()})")
    if is_enabled():
        print(live_cells_line(live_cells_enabled()))
    servers = running_servers()
    if not servers:
        print("No Jupyter server is running on this machine.")
        return 0
    async with server_clients() as clients:
        for listing in await list_server_kernels(servers, clients.open):
            server = listing.server
            if listing.problem:
                print(f"{server.name} at {server.url}: {listing.problem}")
            elif listing.kernels is None:
                print(f"{server.name} at {server.url}: no loomgate extension; {ENABLE_HINT}")
            else:
                print(
                    f"{server.name} at {server.url}: loomgate extension on, "
                    f"{len(listing.kernels)} kernel(s)"
                )
    return 0
