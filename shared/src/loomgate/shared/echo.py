"""Echoing a caller's value inside an error message, without echoing megabytes of it."""

from __future__ import annotations

ECHO_LIMIT = 80


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """Return `value` as the caller typed it (text quoted, its backslashes single, invisible
    characters escaped; anything else as repr), cut to about `limit` characters with its full
    length noted."""
    text = quoted(value) if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes) else len(text)
    return f"{text[: limit - 1]}… ({size:,} characters)"


def quoted(text: str) -> str:
    """Return `text` in single quotes, as typed: only invisible characters are escaped."""
    return "'" + "".join(c if c.isprintable() else repr(c)[1:-1] for c in text) + "'"
