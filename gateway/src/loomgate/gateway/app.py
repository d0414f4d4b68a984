"""`loomgate-gateway`: the command line, the ServerApp it configures, and `gateway.json`."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import secrets
import sys
from pathlib import Path

from jupyter_server.log import log_request as jupyter_log_request
from jupyter_server.prometheus.log_functions import prometheus_log_method
from jupyter_server.serverapp import ServerApp
from tornado import web
from tornado.log import access_log
from traitlets import Float, Unicode
from traitlets.config import Config

from loomgate.gateway import __version__
from loomgate.gateway.errors import StorageFailed
from loomgate.gateway.kernels.registry import DEFAULT_GRACE_SECONDS, DEFAULT_RETENTION_DAYS
from loomgate.gateway.records.record import os_error_reason
from loomgate.gateway.records.store import probe_writable
from loomgate.shared.paths import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    GATEWAY_FILE,
    LOG_FILE,
    GatewayFile,
    ensure_private_dir,
    read_gateway_file,
    state_dir,
    write_gateway_file,
)


class RedactToken(logging.Filter):
    """Replace the gateway token wherever it would appear in a log line."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        """Return True, after rewriting the record's message without the token."""
        message = record.getMessage()
        if self.token in message:
            record.msg, record.args = message.replace(self.token, "<token>"), None
        return True


class GatewayLogFile(logging.FileHandler):
    """The gateway's log file; a disk that refuses the file costs log lines, never a request."""

    def emit(self, record: logging.LogRecord) -> None:
        """Write `record`, or report the failure on stderr if the file cannot be opened."""
        try:
            super().emit(record)
        except OSError:
            self.handleError(record)


def log_request(handler: web.RequestHandler) -> None:
    """Log a request as jupyter_server does, without formatting a line no handler would write.

    jupyter_server logs successes at debug level, but builds the line (and scrubs its URL)
    for every request first.
    """
    status = handler.get_status()
    logger: logging.Logger = getattr(handler, "log", access_log)  # what jupyter_server logs to
    if (status < 300 or status == 304) and not logger.isEnabledFor(logging.DEBUG):
        prometheus_log_method(handler)
        return
    jupyter_log_request(handler)


class LoomgateServerApp(ServerApp):
    """jupyter_server with loomgate's kernel manager, handlers, state dir and nodelay sockets."""

    name = "loomgate-gateway"
    loomgate_state_dir = Unicode("", config=True, help="Where records and gateway.json live.")
    conversation_grace_seconds = Float(
        DEFAULT_GRACE_SECONDS,
        config=True,
        help="How long a conversation kernel outlives its last holder.",
    )
    retention_days = Float(
        DEFAULT_RETENTION_DAYS, config=True, help="How long records outlive their kernel."
    )

    def write_server_info_file(self) -> None:
        """Write jupyter_server's info file, then `gateway.json` (the server is listening now)."""
        super().write_server_info_file()
        info = GatewayFile(
            url=f"http://{url_host(self.ip)}:{self.port}",
            token=self.identity_provider.token,
            pid=os.getpid(),
            version=__version__,
        )
        write_gateway_file(Path(self.loomgate_state_dir), info)
        self.log.info("loomgate gateway %s listening on %s", __version__, info["url"])

    def remove_server_info_file(self) -> None:
        """Remove jupyter_server's info file, and `gateway.json` if it still names this process."""
        super().remove_server_info_file()
        directory = Path(self.loomgate_state_dir)
        current = read_gateway_file(directory)
        if current is not None and current["pid"] == os.getpid():
            (directory / GATEWAY_FILE).unlink(missing_ok=True)


def url_host(host: str) -> str:
    """Return `host` as it goes in a URL (IPv6 in brackets)."""
    return f"[{host}]" if ":" in host else host


def is_loopback(host: str) -> bool:
    """Return whether `host` is a loopback address or `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Return the parsed command line."""
    parser = argparse.ArgumentParser(
        prog="loomgate-gateway",
        description="Run loomgate's resident gateway: a Jupyter Server with execution records.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default loopback)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default 8787)")
    parser.add_argument("--state-dir", help="records, log and gateway.json (default: XDG state)")
    parser.add_argument("--token-env", metavar="VAR", help="read the token from this variable")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
    )
    parser.add_argument(
        "--conversation-grace",
        type=float,
        default=DEFAULT_GRACE_SECONDS,
        metavar="SECONDS",
        help="how long a conversation kernel outlives its last holder (default %(default)g)",
    )
    parser.add_argument(
        "--retention-days",
        type=float,
        default=DEFAULT_RETENTION_DAYS,
        metavar="DAYS",
        help="how long records outlive their kernel (default %(default)g)",
    )
    return parser.parse_args(argv)


def choose_token(args: argparse.Namespace, directory: Path) -> str:
    """Return the token: from --token-env, else the one a previous run saved, else a new one."""
    if args.token_env:
        # Taken out of the environment, so that the kernels this process starts never see it.
        token = os.environ.pop(args.token_env, "")
        if not token:
            raise SystemExit(f"loomgate-gateway: ${args.token_env} is empty or unset")
        return token
    if not is_loopback(args.host):
        raise SystemExit(
            f"loomgate-gateway: binding to {args.host} needs an explicit token "
            "(--token-env VAR); refusing to start"
        )
    previous = read_gateway_file(directory)
    return previous["token"] if previous else secrets.token_urlsafe(32)


def build_app(args: argparse.Namespace) -> LoomgateServerApp:
    """Return an initialized (not yet started) gateway ServerApp."""
    wanted = Path(args.state_dir).expanduser() if args.state_dir else state_dir()
    try:
        directory = ensure_private_dir(wanted)
        probe_writable(directory)
    except (OSError, StorageFailed) as e:
        reason = e.details["reason"] if isinstance(e, StorageFailed) else os_error_reason(e)
        raise SystemExit(
            f"loomgate-gateway: the state dir {wanted} is not writable ({reason}); "
            "fix it or choose another with --state-dir"
        ) from None
    token = choose_token(args, directory)
    os.environ["JUPYTER_RUNTIME_DIR"] = str(ensure_private_dir(directory / "runtime"))
    config = Config()
    config.ServerApp.ip = args.host
    config.ServerApp.port = args.port
    config.ServerApp.port_retries = 0
    config.ServerApp.open_browser = False
    config.ServerApp.allow_root = True
    config.ServerApp.log_level = "WARN" if args.log_level == "WARNING" else args.log_level
    config.ServerApp.kernel_manager_class = (
        "loomgate.gateway.kernels.manager.LoomMappingKernelManager"
    )
    config.ServerApp.kernel_websocket_connection_class = (
        "loomgate.gateway.kernels.manager.NodelayWebsocketConnection"
    )
    config.ServerApp.jpserver_extensions = {"loomgate.gateway.extension": True}
    config.ServerApp.identity_provider_class = "loomgate.gateway.auth.LoomIdentityProvider"
    config.ServerApp.tornado_settings = {"log_function": log_request}
    config.KernelRestarter.time_to_dead = 0.5
    config.LoomgateServerApp.loomgate_state_dir = str(directory)
    config.LoomgateServerApp.conversation_grace_seconds = args.conversation_grace
    config.LoomgateServerApp.retention_days = args.retention_days
    app = LoomgateServerApp(config=config)
    redact = RedactToken(token)
    file_handler = GatewayLogFile(directory / LOG_FILE)
    (directory / LOG_FILE).chmod(0o600)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for logger in (app.log, logging.getLogger()):
        logger.addFilter(redact)
    file_handler.addFilter(redact)
    app.log.addHandler(file_handler)
    logging.getLogger("loomgate").addHandler(file_handler)
    app.initialize(argv=[], find_extensions=False)
    for handler in [*app.log.handlers, *logging.getLogger().handlers]:
        handler.addFilter(redact)
    # Set after initialize so that the token never appears in the (debug-logged) config.
    app.identity_provider.token = token
    app.identity_provider.token_generated = False
    return app


def main(argv: list[str] | None = None) -> int:
    """Run the gateway until it is stopped; return the exit status."""
    args = parse_args(argv)
    try:
        app = build_app(args)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            return 2
        raise
    app.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
