"""`loomgate monitor`: the address of a gateway's read-only monitor page, opened."""

from __future__ import annotations

import argparse
import sys

from loomgate.translator.cli.errors import UsageError
from loomgate.translator.client.errors import GatewayError
from loomgate.translator.client.gateway import GatewayClient

MONITOR_PATH = "/loomgate/monitor"


async def monitor_url(client: GatewayClient) -> str:
    """Return the monitor page's address with the read-only token, which the gateway gives to
    a client holding its full token (local or given by URL)."""
    try:
        access = await client.monitor_access()
    except GatewayError as e:
        if e.status != 404:
            raise
        raise UsageError(
            f"the gateway at {client.url} does not give its monitor token (it predates that); "
            "restart it (loomgate gateway restart) with this version"
        ) from None
    token = access["monitor_token"]
    if token is None:
        raise UsageError(
            f"{client.url} has no monitor token (a Jupyter server's loomgate extension has "
            f"none); open {client.url}{MONITOR_PATH} where you are logged in to it"
        )
    return f"{client.url}{MONITOR_PATH}?token={token}"


async def show_monitor(client: GatewayClient, args: argparse.Namespace) -> int:
    """Print the monitor's address and open it in a browser where there is one."""
    url = await monitor_url(client)
    print(url, flush=True)
    if not args.no_browser:
        import webbrowser  # here: only this command needs it

        try:
            opened = webbrowser.get().open(url)
        except webbrowser.Error:
            opened = False
        if not opened:
            print("no browser to open here; open the address above", file=sys.stderr)
    return 0
