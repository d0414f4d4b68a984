"""What can go wrong reaching a gateway, each in one sentence for a model or a person."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class GatewayError(Exception):
    """A gateway refusal or failure: a stable `code` and one sentence for a model or a person."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        """Return the one-sentence message."""
        return self.message

    def __repr__(self) -> str:
        """Return the code and message, for debugging."""
        return f"GatewayError({self.code!r}, {self.message!r}, status={self.status!r})"


class GatewayConfigError(ValueError):
    """A selection that cannot work: a bad gateways.toml, an unknown name, a missing token."""
