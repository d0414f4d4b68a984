"""Echoing a caller's value inside an error message, without echoing megabytes of it."""

from __future__ import annotations

ECHO_LIMIT = 80


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """Return repr(value), cut to about `limit` characters with its full length noted."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[: limit - 1]}… ({size:,} characters)"
