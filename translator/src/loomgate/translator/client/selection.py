"""Which gateway to talk to: --gateway, $LOOMGATE_URL, a gateways.toml name, or the local one."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from loomgate.shared.echo import echo
from loomgate.translator.client.errors import GatewayConfigError
from loomgate.translator.client.gateways_toml import gateways_file, load_gateways_toml
from loomgate.translator.client.target import (
    JUPYTER_PREFIX,
    LOCAL_URL,
    GatewayTarget,
    TokenSource,
    is_url,
)

FROM_LOOMGATE_TOKEN = TokenSource("in LOOMGATE_TOKEN", "set it to this gateway's token")


def select_gateway(
    option: str | None, env: Mapping[str, str], *, named_by_model: bool = False
) -> GatewayTarget:
    """Return the gateway to use: --gateway (name or URL), else $LOOMGATE_URL, else the local.
    A URL a model named (`named_by_model`) is sent no token: only gateways.toml names carry
    one to a gateway the model chooses."""
    env_token = env.get("LOOMGATE_TOKEN") or None
    source = FROM_LOOMGATE_TOKEN if env_token else None
    if option:
        if is_url(option):
            token = None if named_by_model else env_token
            return GatewayTarget(
                option.rstrip("/"), token, True, None, False, token_source=source if token else None
            )
        if option.startswith(("http:", "https:")) or "://" in option:
            raise GatewayConfigError(
                f"--gateway {echo(option)} is not a valid http:// or https:// URL"
            )
        return named_gateway(option, env)
    url = env.get("LOOMGATE_URL")
    if url:
        if not is_url(url):
            raise GatewayConfigError(
                f"LOOMGATE_URL must be an http:// or https:// URL, not {echo(url)} "
                "(use --gateway NAME for a gateway from gateways.toml)"
            )
        return GatewayTarget(url.rstrip("/"), env_token, True, None, False, token_source=source)
    return GatewayTarget(LOCAL_URL, None, True, None, True)


def named_gateway(name: str, env: Mapping[str, str]) -> GatewayTarget:
    """Return gateway `name` from gateways.toml, with its token_env resolved from `env`."""
    path = gateways_file()
    if name.startswith(JUPYTER_PREFIX) and not (path.exists() and name in load_gateways_toml(path)):
        # A running Jupyter server of the person's, by the name list_kernels gives it.
        from loomgate.translator.client.jupyter_servers import server_named

        server = server_named(name)
        if server is None:
            raise GatewayConfigError(f"no Jupyter server {echo(name)} is running on this machine")
        return server.target()
    if not path.exists():
        raise GatewayConfigError(
            f"unknown gateway {echo(name)}: there is no {path} (a gateway is a name defined there, "
            "or an http:// or https:// URL)"
        )
    targets = load_gateways_toml(path)
    target = targets.get(name)
    if target is None:
        known = ", ".join(sorted(targets)) or "none"
        raise GatewayConfigError(f"unknown gateway {echo(name)}; {path} defines: {known}")
    where = f"of gateway {echo(name)} in {path}"
    token, headers = target.token, target.headers
    source = TokenSource(f"{where}", "put this gateway's token there") if token else None
    if target.token_env is not None:
        token = variable_value(env, target.token_env, f"token_env {where}")
        source = TokenSource(
            f"in {target.token_env} (token_env {where})",
            f"set {target.token_env} to this gateway's token",
        )
    if target.headers_env is not None:
        headers = variable_value(env, target.headers_env, f"headers_env {where}")
    return dataclasses.replace(target, token=token, headers=headers, token_source=source)


def variable_value(env: Mapping[str, str], variable: str, named_by: str) -> str:
    """Return the value of `variable` (GatewayConfigError saying what names it if unset)."""
    value = env.get(variable)
    if not value:
        raise GatewayConfigError(f"{variable} is not set ({named_by})")
    return value
