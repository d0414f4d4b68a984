"""A gateway to talk to: where it is and how to authenticate to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from loomgate.shared.paths import DEFAULT_HOST, DEFAULT_PORT

JUPYTER_PREFIX = "jupyter:"  # the names of the person's running Jupyter servers: jupyter:PORT
LOCAL_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"  # where the local gateway listens


@dataclass(frozen=True)
class TokenSource:
    """Where a client's token came from: how a refusal names it ("the token {named}; {advice}"),
    and for a gateway.json (which `loomgate gateway rotate-token` renews) the dir to read it
    again from when the token is refused."""

    named: str
    advice: str
    gateway_file_dir: Path | None = None


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
