"""Opening a checked client of a selected gateway (the local one found, or started)."""

from __future__ import annotations

from pathlib import Path

from loomgate.shared.paths import read_gateway_file
from loomgate.shared.paths import state_dir as default_state_dir
from loomgate.translator.client.errors import AuthFailed
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.client.local_gateway import (
    gateway_file,
    open_local_client,
    upstream_state_dir,
)
from loomgate.translator.client.session import READ_TIMEOUT
from loomgate.translator.client.target import GatewayTarget


async def open_client(
    target: GatewayTarget,
    *,
    autostart: bool,
    state_dir: Path | None = None,
    timeout: float = 60,
    request_timeout: float = READ_TIMEOUT,
) -> GatewayClient:
    """Return a client of `target`, checked to be a loomgate gateway (starting the local one)."""
    if target.local or target.upstream:
        return await open_local_client(
            target,
            autostart=autostart,
            state_dir=upstream_state_dir(target) if target.upstream else state_dir,
            timeout=timeout,
            request_timeout=request_timeout,
        )
    token, source = target.token, target.token_source
    if token is None:
        directory = state_dir or default_state_dir()
        token, source = token_from_gateway_file(target.url, directory), gateway_file(directory)
    if token is None:
        hint = (
            f"add token_env to gateway {target.name!r} in gateways.toml"
            if target.name
            else "set LOOMGATE_TOKEN (a URL a model names is sent no token: name that gateway in "
            "gateways.toml)"
        )
        raise AuthFailed(f"there is no token for the gateway at {target.url}; {hint}")
    client = GatewayClient(
        target.url,
        token,
        verify=target.verify,
        name=target.name,
        request_timeout=request_timeout,
        token_source=source,
    )
    try:
        await client.info()
    except BaseException:
        await client.aclose()
        raise
    return client


def token_from_gateway_file(url: str, state_dir: Path | None) -> str | None:
    """Return the local gateway.json's token if that file describes the gateway at `url`."""
    info = read_gateway_file(state_dir or default_state_dir())
    if info is not None and info["url"].rstrip("/") == url.rstrip("/"):
        return info["token"]
    return None
