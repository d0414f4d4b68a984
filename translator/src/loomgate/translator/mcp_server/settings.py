"""How a translator was started: `loomgate-mcp`'s command line, parsed and rebuilt."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from loomgate.shared.hosts import is_loopback
from loomgate.shared.paths import state_dir
from loomgate.translator.client.session import READ_TIMEOUT
from loomgate.translator.output_view import OutputLimits
from loomgate.translator.presentation.http_access import http_auth_help

Transport = Literal["stdio", "streamable-http"]
ResultMode = Literal["structured", "content"]
MIN_LINES = 2
MIN_CHARS = 100
MAX_REQUEST_TIMEOUT = 3600.0
MCP_TOKEN_FILE = "mcp_token"  # in the state dir: the bearer token HTTP hosts send (0600)


class SettingsError(ValueError):
    """A command line that parses but cannot work (a limit out of range)."""


@dataclass
class Settings:
    """One translator's options: its command line, plus the cwd and environment it runs in."""

    gateway: str | None = None
    kernel: str | None = None
    transport: Transport = "stdio"
    host: str = "127.0.0.1"
    port: int = 8801
    path: str = "/mcp"
    token_env: str | None = None  # HTTP: the variable holding the bearer token (else the file's)
    auth: bool = True  # HTTP: require the bearer token (--no-auth: loopback only)
    result_mode: ResultMode = "structured"
    output_schemas: bool = False  # list each tool's outputSchema (structured mode only)
    quiet: bool = False
    autostart: bool = True
    limits: OutputLimits = field(default_factory=OutputLimits)
    request_timeout: float = READ_TIMEOUT
    cwd: str = field(default_factory=os.getcwd)
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    @property
    def structured(self) -> bool:
        """Return whether results carry structuredContent beside their text."""
        return self.result_mode == "structured"

    @classmethod
    def from_args(cls, argv: list[str] | None = None) -> Settings:
        """Return the settings a command line asks for (SettingsError if a value cannot work)."""
        args = parser().parse_args(argv)
        if args.max_lines < MIN_LINES or args.max_chars < MIN_CHARS:
            raise SettingsError(f"--max-lines must be ≥ {MIN_LINES} and --max-chars ≥ {MIN_CHARS}")
        if not 0 < args.request_timeout <= MAX_REQUEST_TIMEOUT:
            raise SettingsError(f"--request-timeout must be between 0 and {MAX_REQUEST_TIMEOUT:g}")
        problem = http_auth_problem(args)
        if problem is not None:
            raise SettingsError(problem)
        cwd = str(Path.cwd())
        if args.cwd is not None:
            chosen = Path(args.cwd).expanduser()
            if not chosen.is_dir():
                raise SettingsError(f"--cwd {args.cwd} is not a directory")
            cwd = str(chosen.resolve())
        return cls(
            cwd=cwd,
            gateway=args.gateway,
            kernel=args.kernel,
            transport=args.transport,
            host=args.host,
            port=args.port,
            path=args.path,
            token_env=args.token_env,
            auth=not args.no_auth,
            result_mode=args.result_mode,
            output_schemas=args.output_schemas,
            quiet=args.quiet,
            autostart=not args.no_autostart,
            limits=OutputLimits(args.max_lines, args.max_chars),
            request_timeout=args.request_timeout,
        )

    def argv(self) -> list[str]:
        """Return the command-line arguments that give these settings (cwd and env aside)."""
        args = [
            "--transport",
            self.transport,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--path",
            self.path,
            "--result-mode",
            self.result_mode,
            "--max-lines",
            str(self.limits.max_lines),
            "--max-chars",
            str(self.limits.max_chars),
            "--request-timeout",
            repr(self.request_timeout),
        ]
        options = (("--gateway", self.gateway), ("--kernel", self.kernel))
        for flag, value in (*options, ("--token-env", self.token_env)):
            if value is not None:
                args += [flag, value]
        args += ["--output-schemas"] * self.output_schemas + ["--quiet"] * self.quiet
        args += ["--no-auth"] * (not self.auth)
        return args + ["--no-autostart"] * (not self.autostart)


def http_auth_problem(args: argparse.Namespace) -> str | None:
    """Return why --token-env or --no-auth cannot work with the rest of the command line, or
    None: both are for Streamable HTTP, exclude each other, and --no-auth stays on loopback."""
    given = "--no-auth" if args.no_auth else "--token-env" if args.token_env else None
    if given is None:
        return None
    if args.transport != "streamable-http":
        return f"{given} is for --transport streamable-http; over stdio the host starts the server"
    if args.no_auth and args.token_env:
        return "--no-auth and --token-env exclude each other: give one"
    if args.no_auth and not is_loopback(args.host):
        return (
            f"--no-auth is refused with --host {args.host}: anyone who reaches that address "
            "could run code in your kernels; drop --no-auth (a bearer token is then required) or "
            "bind a loopback --host"
        )
    return None


def token_file() -> Path:
    """Return where the bearer token of `loomgate-mcp` over Streamable HTTP is kept."""
    return state_dir() / MCP_TOKEN_FILE


def parser() -> argparse.ArgumentParser:
    """Return `loomgate-mcp`'s argument parser."""
    defaults = Settings(cwd="", env={})
    parser = argparse.ArgumentParser(
        prog="loomgate-mcp",
        description="MCP server for persistent, inspectable Jupyter kernels on a loomgate gateway.",
        epilog=http_auth_help(str(token_file())),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--gateway", help="a gateways.toml name or a URL (default: local)")
    parser.add_argument("--kernel", help="attach to this kernel (name or id prefix) at first use")
    parser.add_argument(
        "--cwd",
        help="working directory of the kernels this server creates (default: its own; for "
        "hosts that cannot set one)",
    )
    parser.add_argument(
        "--transport",
        choices=["stdio", "streamable-http"],
        default=defaults.transport,
        help="(%(default)s)",
    )
    parser.add_argument("--host", default=defaults.host, help="HTTP bind address (%(default)s)")
    parser.add_argument("--port", type=int, default=defaults.port, help="HTTP port (%(default)s)")
    parser.add_argument("--path", default=defaults.path, help="HTTP path (%(default)s)")
    parser.add_argument(
        "--token-env",
        metavar="NAME",
        help="HTTP: the bearer token hosts send is in this environment variable (default: one "
        "made once and kept in the state dir)",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="HTTP: serve without a bearer token (refused with a non-loopback --host)",
    )
    parser.add_argument(
        "--result-mode",
        choices=["structured", "content"],
        default=defaults.result_mode,
        help="structured: text plus structuredContent (default); content: text only",
    )
    parser.add_argument(
        "--output-schemas",
        action="store_true",
        help="structured mode: also list each tool's outputSchema, for hosts that validate or "
        "type structuredContent (about 7,000 more characters of tools/list)",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="do not show what startup.py printed (its failures still show)",
    )
    parser.add_argument("--no-autostart", action="store_true", help="never start the local gateway")
    parser.add_argument(
        "--max-lines",
        type=int,
        default=defaults.limits.max_lines,
        help="lines of a cell's output before head/tail (%(default)s)",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        default=defaults.limits.max_chars,
        help="characters before head/tail (%(default)s)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=defaults.request_timeout,
        metavar="SECONDS",
        help="how long the gateway may take to answer a request (%(default)g)",
    )
    return parser
