"""What a kernel may be started with (a name, a lifetime, a working directory, environment
variables), each checked before anything starts."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TypedDict

from loomgate.gateway.errors import BadRequest, Conflict
from loomgate.gateway.records.stored_meta import KernelMeta
from loomgate.shared import wire
from loomgate.shared.echo import echo
from loomgate.shared.wire import LIFETIMES


class KernelIntent(TypedDict, total=False):
    """What a kernel is started as: its name, lifetime, directory and environment, or, for an
    upstream's kernel attached by its id, when it was attached; and whether a model may use it."""

    name: str | None
    lifetime: wire.Lifetime
    cwd: str | None
    env: dict[str, str]
    attached: float
    open_to_agents: bool  # whether a model may use it (absent: no)
    forked_from: wire.ForkedFrom  # a fork's origin (absent: not a fork)


NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_name_and_lifetime(name: str | None, lifetime: str) -> wire.Lifetime:
    """Return `lifetime` as one; BadRequest for an invalid kernel name or an unknown lifetime."""
    if name is not None and not NAME_PATTERN.match(name):
        raise BadRequest(
            f"kernel name {echo(name)} is invalid: use 1-64 letters, digits, '.', '_' or '-'"
        )
    for known in LIFETIMES:
        if lifetime == known:
            return known
    raise BadRequest(f"lifetime must be 'persistent' or 'conversation', not {echo(lifetime)}")


def check_existing(
    meta: KernelMeta, name: str, kernel_spec: str | None, sandbox: str | None
) -> None:
    """Refuse (Conflict) to give the live kernel `name` to a request for another kernel spec
    or sandbox profile than the one it runs (a profile is fixed for a kernel's life)."""
    running_spec = meta.get("kernel_spec")
    if kernel_spec is not None and kernel_spec != running_spec:
        raise Conflict(
            f"kernel {echo(name)} already runs kernel spec {running_spec!r}, "
            f"not {echo(kernel_spec)}; choose another name or stop it first"
        )
    kept = meta.get("sandbox")
    running = kept["profile"] if kept else None
    if sandbox is not None and sandbox != running:
        raise Conflict(
            f"kernel {echo(name)} already runs under the sandbox profile "
            f"{running or 'of whoever started it'}, not {echo(sandbox)}; a kernel's profile "
            "is fixed for its life: choose another name or stop it"
        )


def validated_cwd(cwd: str) -> str:
    """Return `cwd` if it is an existing absolute directory here; BadRequest otherwise."""
    path = Path(cwd).expanduser()
    if not path.is_absolute() or not path.is_dir():
        raise BadRequest(f"cwd {echo(cwd)} is not an existing absolute directory on the gateway")
    return str(path)


def kernel_environment(env: dict[str, str]) -> dict[str, str]:
    """Return the gateway's environment with `env` laid over it (BadRequest for a bad name or
    value)."""
    bad = [
        key
        for key, value in env.items()
        if not ENV_NAME_PATTERN.match(key) or not isinstance(value, str) or "\0" in value
    ]
    if bad:
        raise BadRequest(f"invalid environment variables: {', '.join(map(repr, bad))}")
    return {**os.environ, **env}
