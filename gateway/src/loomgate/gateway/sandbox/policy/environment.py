"""The environment a confined kernel inherits: the gateway's, without its secrets (by their
names, and any value that carries a URL's credentials)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import translate

from loomgate.shared.credentials import carries_credentials

__all__ = ["SECRET_ENVIRONMENT", "confined_environment", "is_secret"]

# Names (and fnmatch patterns, matched on the upper-cased name) a confined kernel never
# inherits: tokens that act as the gateway, Jupyter or the person, and the agents' sockets
# through which something outside the sandbox would sign or run code for the kernel.
SECRET_ENVIRONMENT: tuple[str, ...] = (
    # loomgate and Jupyter
    "LOOMGATE_TOKEN",
    "LOOMGATE_UPSTREAM_TOKEN",
    "LOOMGATE_UPSTREAM_HEADERS",
    "JUPYTER_TOKEN",
    "JPY_API_TOKEN",
    "JUPYTERHUB_API_TOKEN",
    # agents and sockets outside the sandbox
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "GNOME_KEYRING_CONTROL",
    "KRB5CCNAME",
    # clouds and forges
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "AZURE_CLIENT_SECRET",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITLAB_TOKEN",
    "TWINE_PASSWORD",
    "VAULT_TOKEN",
    # anything named like a credential
    "*_TOKEN",
    "*_SECRET",
    "*_SECRET_*",
    "*SECRET_KEY",
    "*PASSWORD*",
    "*PASSWD*",
    "MYSQL_PWD",
    "*_API_KEY",
    "*_APIKEY",
    "*_ACCESS_KEY",
    "*_PRIVATE_KEY",
    "*_CREDENTIALS",
)


# Every pattern in one expression, compiled once: each confined kernel's start asks it of every
# variable of the gateway's environment.
SECRET_NAME = re.compile("|".join(f"(?:{translate(pattern)})" for pattern in SECRET_ENVIRONMENT))


def is_secret(name: str, extra_secret: Iterable[str] = ()) -> bool:
    """Return whether a confined kernel must not inherit variable `name`."""
    return name in extra_secret or SECRET_NAME.match(name.upper()) is not None


def confined_environment(
    env: Mapping[str, str], extra_secret: Iterable[str] = ()
) -> dict[str, str]:
    """Return `env` without the variables a confined kernel must not inherit: SECRET_ENVIRONMENT,
    the names in `extra_secret` (the gateway's --token-env variable), and any whose value
    carries a URL's credentials (UV_INDEX_URL=https://user:secret@…)."""
    extra = frozenset(extra_secret)
    return {
        name: value
        for name, value in env.items()
        if not is_secret(name, extra) and not carries_credentials(value)
    }
