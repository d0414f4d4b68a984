"""Values that carry a credential in a URL (`https://user:secret@host/…`, `git+https://token@…`):
an environment variable holding one is passed on neither to a started gateway nor to a confined
kernel, whatever its name (the gateway and the translator ask)."""

from __future__ import annotations

import re

__all__ = ["carries_credentials"]

# A scheme, "://", then a user part (with or without a password) that ends at "@" before the
# host: no "/", "?", "#" or space can come between.
URL_USER = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@]+@")


def carries_credentials(value: str) -> bool:
    """Return whether `value` holds a URL with a user or password in it (anywhere: a list of
    index URLs holds several)."""
    return URL_USER.search(value) is not None
