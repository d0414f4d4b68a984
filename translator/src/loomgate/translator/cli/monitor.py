"""`loomgate monitor`: the address of the local gateway's read-only monitor page, opened."""

from __future__ import annotations

import argparse
import sys

from loomgate.shared.paths import read_gateway_file, state_dir
from loomgate.translator.cli.errors import UsageError
from loomgate.translator.client.gateway import GatewayClient

MONITOR_PATH = "/loomgate/monitor"


def monitor_url(client: GatewayClient) -> str:
    """Return the monitor page's address with the read-only token (local gateways only)."""
    if not client.local:
        raise UsageError(
            "loomgate monitor opens the local gateway's page; the monitor token of a gateway "
            "given by URL is in the gateway.json of its state dir (monitor_token)"
        )
    info = read_gateway_file(state_dir())
    if info is None or "monitor_token" not in info or info["url"] != client.url:
        raise UsageError(
            "this gateway has no monitor token; restart it (loomgate gateway restart) to get one"
        )
    return f"{client.url}{MONITOR_PATH}?token={info['monitor_token']}"


async def show_monitor(client: GatewayClient, args: argparse.Namespace) -> int:
    """Print the monitor's address and open it in a browser where there is one."""
    url = monitor_url(client)
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
