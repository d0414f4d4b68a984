"""`loomgate-mcp`: the command line that starts the translator on stdio or Streamable HTTP."""

from __future__ import annotations

import argparse
import logging
import sys

from loomgate.translator.presentation import OutputLimits
from loomgate.translator.session import Settings


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Return the parsed command line."""
    parser = argparse.ArgumentParser(
        prog="loomgate-mcp",
        description="MCP server for persistent, inspectable Jupyter kernels on a loomgate gateway.",
    )
    parser.add_argument("--gateway", help="a gateways.toml name or a URL (default: local)")
    parser.add_argument("--kernel", help="attach to this kernel (name or id prefix) at first use")
    parser.add_argument(
        "--transport", choices=["stdio", "streamable-http"], default="stdio", help="(stdio)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8801, help="HTTP port (8801)")
    parser.add_argument("--path", default="/mcp", help="HTTP path (/mcp)")
    parser.add_argument(
        "--result-mode",
        choices=["structured", "content"],
        default="structured",
        help="structured: text plus structuredContent (default); content: text only",
    )
    parser.add_argument("--quiet", action="store_true", help="do not show startup.py output")
    parser.add_argument("--no-autostart", action="store_true", help="never start the local gateway")
    parser.add_argument(
        "--max-lines", type=int, default=200, help="lines of a cell's output before head/tail"
    )
    parser.add_argument(
        "--max-chars", type=int, default=20_000, help="characters before head/tail (20000)"
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long the gateway may take to answer a request (60)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the MCP server until the host closes it; return the exit status."""
    import anyio

    from loomgate.translator.server import build_server
    from loomgate.translator.stdio import serve_stdio

    args = parse_args(argv)
    if args.max_lines < 2 or args.max_chars < 100:
        print("loomgate-mcp: --max-lines must be ≥ 2 and --max-chars ≥ 100", file=sys.stderr)
        return 2
    if not 0 < args.request_timeout <= 3600:
        print("loomgate-mcp: --request-timeout must be between 0 and 3600", file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    settings = Settings(
        gateway=args.gateway,
        kernel=args.kernel,
        result_mode=args.result_mode,
        quiet=args.quiet,
        autostart=not args.no_autostart,
        limits=OutputLimits(args.max_lines, args.max_chars),
        request_timeout=args.request_timeout,
    )
    server = build_server(settings)
    if args.transport == "stdio":
        anyio.run(serve_stdio, server)
    else:
        server.run(
            "streamable-http", host=args.host, port=args.port, streamable_http_path=args.path
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
