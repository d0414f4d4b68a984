"""The bearer token `loomgate-mcp` requires over Streamable HTTP: where it comes from (its
--token-env variable, else a file of its own in the state dir) and the SDK's check of it."""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from mcp.server.auth.provider import AccessToken, TokenVerifier

from loomgate.shared.paths import read_token_file, write_token_file
from loomgate.translator.mcp_server.settings import Settings, SettingsError, token_file

CLIENT_ID = "mcp-host"  # who holds the token: whichever host the person gave it to


@dataclass(frozen=True)
class BearerToken:
    """The token every HTTP request must carry, and where the person finds it: `file` (kept
    0600 in the state dir) or `env` (the variable --token-env names)."""

    value: str
    file: Path | None = None
    env: str | None = None

    def __repr__(self) -> str:
        return f"BearerToken(file={self.file!r}, env={self.env!r})"  # never the token


class BearerTokenVerifier(TokenVerifier):
    """The SDK's token check (`MCPServer(token_verifier=…)`), comparing in constant time."""

    def __init__(self, token: BearerToken) -> None:
        self._expected = token.value.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        """Return the access a request with `token` gets: all of it, or None (a 401)."""
        if not hmac.compare_digest(token.encode(), self._expected):
            return None
        return AccessToken(token=token, client_id=CLIENT_ID, scopes=[])


def bearer_token(settings: Settings) -> BearerToken | None:
    """Return the token an HTTP server with `settings` requires (None: --no-auth).

    From --token-env's variable, taken out of this process's environment so that nothing it
    starts inherits it; else the one kept in the state dir, made (with `secrets`) on first use.
    """
    if not settings.auth:
        return None
    name = settings.token_env
    if name:
        value = settings.env.pop(name, "") or os.environ.get(name, "")
        os.environ.pop(name, None)
        if not value.strip():
            raise SettingsError(
                f"--token-env {name}: ${name} is empty or unset; set it to the token hosts "
                f"will send, or leave --token-env out to use the one kept in {token_file()}"
            )
        return BearerToken(value.strip(), env=name)
    path = token_file()
    kept = read_token_file(path.parent, path.name)
    try:
        if kept is None:
            kept = secrets.token_urlsafe(32)
            write_token_file(path.parent, kept, path.name)
        else:
            path.chmod(0o600)  # kept as made: readable by its owner only
    except OSError as e:
        raise SettingsError(
            f"cannot keep the bearer token in {path} ({e.strerror or e}); make the state dir "
            "writable, or give --token-env NAME"
        ) from None
    return BearerToken(kept, file=path)
