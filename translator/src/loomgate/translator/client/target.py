"""A gateway to talk to: where it is and how to authenticate to it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from loomgate.shared.paths import DEFAULT_HOST, DEFAULT_PORT, read_gateway_file

JUPYTER_PREFIX = "jupyter:"  # the names of the person's running Jupyter servers: jupyter:PORT
LOCAL_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"  # where the local gateway listens
# A refused token from a gateway.json is read again: a gateway restarted with a new one
# (`loomgate gateway rotate-token`) writes it just after it starts listening.
RENEW_WAIT = 5.0
RENEW_POLL = 0.05


@dataclass(frozen=True)
class TokenSource:
    """Where a client's token came from: how a refusal names it ("the token {named}; {advice}"),
    and for a gateway.json (which `loomgate gateway rotate-token` renews) the dir to read it
    again from when the token is refused."""

    named: str
    advice: str
    gateway_file_dir: Path | None = None

    async def read_again(self, url: str, refused: str) -> str | None:
        """Return the token the gateway.json names now for the gateway at `url`, once it is
        not `refused` (waiting up to RENEW_WAIT s for a restarting gateway to write it); None
        for a source that cannot change, or no new token in time."""
        if self.gateway_file_dir is None:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RENEW_WAIT
        while True:
            info = read_gateway_file(self.gateway_file_dir)
            if info is not None and info["url"].rstrip("/") == url and info["token"] != refused:
                return info["token"]
            if loop.time() > deadline:
                return None
            await asyncio.sleep(RENEW_POLL)


@dataclass(frozen=True)
class GatewayTarget:
    """Where a gateway is and how to authenticate to it (the token never shows in its repr)."""

    url: str
    token: str | None = field(repr=False)
    verify: bool
    name: str | None
    local: bool
    # Set on gateways.toml entries with `token_env`; select_gateway resolves it into `token`.
    token_env: str | None = None
    # A gateways.toml entry of `kind = "jupyter"`: `url` is a plain Jupyter server (a Hub user
    # server, Kernel Gateway, Enterprise Gateway) reached through a local gateway in upstream
    # mode, started for it on first use; `token` is the upstream's, `headers` its extra headers
    # (a JSON object, from `headers_env`).
    upstream: bool = False
    headers_env: str | None = None
    headers: str | None = field(default=None, repr=False)
    # Where `token` came from, for its refusal (not part of which gateway it is).
    token_source: TokenSource | None = field(default=None, compare=False)


def is_url(value: str) -> bool:
    """Return whether `value` is an http:// or https:// URL with a host."""
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)
