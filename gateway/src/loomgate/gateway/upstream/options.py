"""`loomgate-gateway --upstream …`: its options, checked, and the server config they make."""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from jupyter_server.gateway.gateway_client import GatewayClient
from traitlets.config import Config

KERNEL_MANAGER = "loomgate.gateway.upstream.manager.UpstreamMappingKernelManager"
WEBSOCKET_CONNECTION = "loomgate.gateway.upstream.manager.UpstreamWebsocketConnection"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the upstream options to the gateway's command line."""
    group = parser.add_argument_group(
        "upstream mode",
        "kernels on another Jupyter server (Jupyter Server, JupyterHub user server, Kernel "
        "Gateway, Enterprise Gateway); their records are kept here",
    )
    group.add_argument("--upstream", metavar="URL", help="the upstream server's base URL")
    group.add_argument(
        "--upstream-token-env", metavar="VAR", help="read the upstream's token from this variable"
    )
    group.add_argument(
        "--upstream-verify",
        choices=["true", "false"],
        default="true",
        help="check the upstream's TLS certificate (default true; false for a self-signed one)",
    )
    group.add_argument(
        "--upstream-headers-env",
        metavar="VAR",
        help="extra HTTP headers for the upstream, a JSON object in this variable",
    )


def check(args: argparse.Namespace) -> str | None:
    """Return why the upstream options cannot work (None when they can, or are not given)."""
    if args.upstream is None:
        given = [args.upstream_token_env, args.upstream_headers_env]
        return "--upstream-… options need --upstream URL" if any(given) else None
    parts = urlsplit(args.upstream)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--upstream must be an http:// or https:// URL, not {args.upstream!r}"
    for option, var in (
        ("--upstream-token-env", args.upstream_token_env),
        ("--upstream-headers-env", args.upstream_headers_env),
    ):
        if var is not None and not os.environ.get(var):
            return f"{option}: ${var} is empty or unset"
    if args.upstream_headers_env is not None:
        try:
            headers = json.loads(os.environ[args.upstream_headers_env])
        except ValueError as e:
            return f"--upstream-headers-env: ${args.upstream_headers_env} is not JSON ({e})"
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            return (
                f"--upstream-headers-env: ${args.upstream_headers_env} must be a JSON object "
                "of strings"
            )
    return None


def configure(config: Config, args: argparse.Namespace) -> None:
    """Make the server a gateway whose kernels live on the upstream (no secret goes in config)."""
    config.GatewayClient.url = args.upstream.rstrip("/")
    config.GatewayClient.validate_cert = args.upstream_verify == "true"
    config.ServerApp.kernel_manager_class = KERNEL_MANAGER
    config.ServerApp.kernel_websocket_connection_class = WEBSOCKET_CONNECTION
    config.UpstreamMappingKernelManager.token_env = args.upstream_token_env or ""


@dataclass(frozen=True)
class UpstreamSecrets:
    """The upstream's token and extra headers, kept out of config, environment and logs."""

    token: str
    headers: str  # a JSON object

    def values(self) -> list[str]:
        """Return every secret a log line must never show."""
        headers: dict[str, str] = json.loads(self.headers)
        return [value for value in (self.token, *headers.values()) if value]


def take_secrets(args: argparse.Namespace) -> UpstreamSecrets:
    """Return the upstream secrets, taken out of the environment (kernels never see them)."""
    token = os.environ.pop(args.upstream_token_env) if args.upstream_token_env else ""
    headers = os.environ.pop(args.upstream_headers_env) if args.upstream_headers_env else "{}"
    return UpstreamSecrets(token=token, headers=headers)


def apply_secrets(secrets: UpstreamSecrets) -> None:
    """Give them to jupyter_server's gateway client (once the server is initialized)."""
    client = GatewayClient.instance()
    client.auth_token = secrets.token  # never JUPYTER_GATEWAY_AUTH_TOKEN from the environment
    client.headers = secrets.headers
