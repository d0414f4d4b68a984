"""How a person reaches `loomgate-mcp` over Streamable HTTP: its start line, the host's
registration command, `--help`'s note on the token, and the sentence of a 401."""

from __future__ import annotations

import shlex

HOST_NAME = "loomgate"  # the server's name in the host's registration


def endpoint_url(host: str, port: int, path: str) -> str:
    """Return the URL a host on this machine posts to (an IPv6 address in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


def bearer_header(token_file: str | None, token_env: str | None) -> str:
    """Return the Authorization header as a shell writes it: the token read from its file or
    its variable when the command runs, never the token itself."""
    token = f"${token_env}" if token_env else f"$(cat {shlex.quote(token_file or '')})"
    return f"Authorization: Bearer {token}"


def registration_command(url: str, token_file: str | None, token_env: str | None) -> str:
    """Return the `claude mcp add` line that registers this server with its bearer token."""
    header = bearer_header(token_file, token_env)
    return f'claude mcp add --transport http {HOST_NAME} {url} --header "{header}"'


def http_start_lines(url: str, *, token_file: str | None, token_env: str | None) -> str:
    """Return what `loomgate-mcp` prints once it listens: where, and how a host sends the token
    (named by its file or variable, never printed); `token_file` and `token_env` both None
    mean --no-auth."""
    if token_file is None and token_env is None:
        return (
            f"loomgate-mcp: serving MCP at {url} without authentication (--no-auth): any "
            "process on this machine that reaches it can run code in your kernels."
        )
    where = f"${token_env}" if token_env else f"{token_file} (mode 0600)"
    return (
        f'loomgate-mcp: serving MCP at {url}; every request needs "Authorization: Bearer '
        f'<token>", the token in {where}. Register it with:\n'
        + registration_command(url, token_file, token_env)
    )


def http_auth_help(token_file: str) -> str:
    """Return `--help`'s closing note: how a host sends the token over Streamable HTTP."""
    url = endpoint_url("127.0.0.1", 8801, "/mcp")
    return (
        'Over --transport streamable-http every request needs "Authorization: Bearer <token>".\n'
        "The token is made once and kept (mode 0600) in\n"
        f"  {token_file}\n"
        "unless --token-env NAME names the variable that holds yours. A host registers the\n"
        "server with, for example:\n"
        f"  {registration_command(url, token_file, None)}\n"
        "--no-auth serves without a token, on a loopback --host only."
    )


def unauthorized(sent: bool) -> str:
    """Return the one sentence of a 401: the header was missing (not `sent`) or its token wrong."""
    if sent:
        return (
            "loomgate-mcp refused the bearer token: send the one in the file or variable its "
            'start line names, as "Authorization: Bearer <token>".'
        )
    return (
        'loomgate-mcp needs the header "Authorization: Bearer <token>", with the token in the '
        "file or variable its start line names."
    )
