"""`loomgate-gateway`: the command line, the ServerApp it configures, and `gateway.json`."""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import secrets
import signal
import sys
from pathlib import Path

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_server.serverapp import ServerApp
from traitlets import Float, Integer, Unicode
from traitlets.config import Config

from loomgate.gateway import __version__
from loomgate.gateway.auth import LoomIdentityProvider, monitor_token_of
from loomgate.gateway.errors import StorageFailed
from loomgate.gateway.gateway_log import GatewayLogFile, RedactToken
from loomgate.gateway.kernels.holders import DEFAULT_IDLE_CAP
from loomgate.gateway.kernels.pool import DEFAULT_PREWARM
from loomgate.gateway.kernels.registry import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_RETENTION_DAYS,
    RECORDS_DIR,
    KernelRegistry,
)
from loomgate.gateway.records.record import os_error_reason
from loomgate.gateway.records.store import probe_writable
from loomgate.gateway.request_log import log_request
from loomgate.gateway.residency.launch_arguments import PROVISIONER_NAME
from loomgate.gateway.upstream import options as upstream
from loomgate.shared.hosts import is_loopback
from loomgate.shared.paths import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    GATEWAY_FILE,
    LOG_FILE,
    MONITOR_TOKEN_FILE,
    GatewayFile,
    ensure_private_dir,
    read_gateway_file,
    read_token_file,
    state_dir,
    write_gateway_file,
    write_port_file,
    write_token_file,
)

LOCK_FILE = "gateway.lock"


class LoomgateServerApp(ServerApp):
    """jupyter_server with loomgate's kernel manager, handlers, state dir and nodelay sockets."""

    name = "loomgate-gateway"
    loomgate_state_dir = Unicode("", config=True, help="Where records and gateway.json live.")
    conversation_grace_seconds = Float(
        DEFAULT_GRACE_SECONDS,
        config=True,
        help="How long a conversation kernel outlives its last holder.",
    )
    idle_conversations = Integer(
        DEFAULT_IDLE_CAP, config=True, help="Idle conversation kernels nobody holds, at most."
    )
    retention_days = Float(
        DEFAULT_RETENTION_DAYS, config=True, help="How long records outlive their kernel."
    )
    prewarm = Integer(
        DEFAULT_PREWARM, config=True, help="Idle kernels kept ready per kernel spec asked for."
    )

    def write_server_info_file(self) -> None:
        """Write jupyter_server's info file, then `gateway.json` (the server is listening now)."""
        super().write_server_info_file()
        info = GatewayFile(
            url=f"http://{url_host(self.ip)}:{self.port}",
            token=self.identity_provider.token,
            pid=os.getpid(),
            version=__version__,
            monitor_token=monitor_token_of(self.identity_provider),
        )
        write_gateway_file(Path(self.loomgate_state_dir), info)
        # Kept after a stop: autostart and `loomgate gateway start` use it until another is chosen.
        write_port_file(Path(self.loomgate_state_dir), self.port)
        self.log.info(
            "loomgate gateway %s listening on %s; Ctrl-C or SIGTERM stop it and leave the "
            "kernels running for the next start (`loomgate gateway stop` ends them)",
            __version__,
            info["url"],
        )

    def init_signal(self) -> None:
        """Stop at the first SIGINT or SIGTERM (no y/n prompt), leaving the kernels running."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._stop_on_signal)

    def _stop_on_signal(self, signum: int, frame: object) -> None:
        self.log.info(
            "Received %s: stopping; the kernels keep running", signal.Signals(signum).name
        )
        self.stop(from_signal=True)

    async def cleanup_kernels(self) -> None:
        """Stop the kernels only if asked to (`loomgate gateway stop`); else leave them running.

        A gateway started later on this state dir takes back the ones it leaves. A failure is
        logged and the stop goes on: the server's cleanup after this one lets go of its port.
        """
        registry: KernelRegistry | None = self.web_app.settings.get("loomgate_registry")
        try:
            if registry is not None:
                pooled = await registry.pool.stop_all()
                self.log.info("Stopped %d prewarmed kernel(s)", pooled)
            if registry is None or registry.stop_kernels_on_exit:
                if registry is not None:
                    registry.abandon_starts()  # a kernel still starting is ended, not waited for
                    await registry.settle_all()
                await super().cleanup_kernels()
                return
            left = registry.leave_all()
            self.log.info("Leaving %d kernel(s) running for the next gateway", left)
        except Exception:
            self.log.exception("Not every kernel could be stopped or left; stopping all the same")

    def start(self) -> None:
        """Serve until stopped; only then (its port and kernels let go) remove `gateway.json` if it
        still names this process: `loomgate gateway status` must not say that none runs before."""
        try:
            super().start()
        finally:
            directory = Path(self.loomgate_state_dir)
            current = read_gateway_file(directory)
            if current is not None and current["pid"] == os.getpid():
                (directory / GATEWAY_FILE).unlink(missing_ok=True)


def url_host(host: str) -> str:
    """Return `host` as it goes in a URL (IPv6 in brackets)."""
    return f"[{host}]" if ":" in host else host


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
        "--idle-conversations",
        type=int,
        default=DEFAULT_IDLE_CAP,
        metavar="N",
        help="idle conversation kernels nobody holds kept through their grace at once; beyond N "
        "the longest idle is stopped first (never a busy or named one; default %(default)d)",
    )
    parser.add_argument(
        "--retention-days",
        type=float,
        default=DEFAULT_RETENTION_DAYS,
        metavar="DAYS",
        help="how long records outlive their kernel (default %(default)g)",
    )
    parser.add_argument(
        "--prewarm",
        type=int,
        default=DEFAULT_PREWARM,
        metavar="N",
        help="started, idle kernels kept ready for new kernels of the default kernel spec "
        "(default %(default)d; 0 turns it off)",
    )
    parser.add_argument(
        "--kernel-spec",
        metavar="NAME",
        help="the kernel spec of kernels started without one, prewarmed ones too (default: "
        "python3, ipykernel; `py` is ipymini: docs/kernels.md)",
    )
    upstream.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.kernel_spec is not None and not args.upstream:
        known = KernelSpecManager().find_kernel_specs()
        if args.kernel_spec not in known:
            parser.error(
                f"--kernel-spec {args.kernel_spec!r} is not a kernel spec here "
                f"(jupyter kernelspec list: {', '.join(sorted(known))})"
            )
    for option in ("prewarm", "idle_conversations"):
        if getattr(args, option) < 0:
            parser.error(f"--{option.replace('_', '-')} must be 0 or more")
    problem = upstream.check(args)
    if problem is not None:
        parser.error(problem)
    return args


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
    kept = read_token_file(directory)
    if kept is not None:
        return kept
    previous = read_gateway_file(directory)  # a gateway.json from before the token file
    token = previous["token"] if previous else secrets.token_urlsafe(32)
    write_token_file(directory, token)
    return token


def monitor_token(directory: Path) -> str:
    """Return the read-only monitor token: the one a previous run kept, else a new one (kept).

    Kept across restarts, so that an open monitor page reconnects after one.
    """
    kept = read_token_file(directory, MONITOR_TOKEN_FILE)
    if kept is not None:
        return kept
    token = secrets.token_urlsafe(32)
    write_token_file(directory, token, MONITOR_TOKEN_FILE)
    return token


def lock_state_dir(directory: Path) -> int:
    """Return a held lock on the state dir (SystemExit if another gateway holds it).

    Two gateways on one state dir would take back the same kernels; the lock lasts as long as
    this process, which never releases it on purpose. It is held on a read-only descriptor, so
    that it never pins the filesystem writable; the holder's pid is written beside it.
    """
    path = directory / LOCK_FILE
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = path.read_text(errors="replace").strip() or "?"
        os.close(fd)
        raise SystemExit(
            f"loomgate-gateway: another gateway (pid {holder}) uses the state dir {directory}; "
            "stop it first (loomgate gateway stop), or choose another with --state-dir"
        ) from None
    path.write_text(str(os.getpid()))
    return fd


def build_app(args: argparse.Namespace) -> LoomgateServerApp:
    """Return an initialized (not yet started) gateway ServerApp."""
    wanted = Path(args.state_dir).expanduser() if args.state_dir else state_dir()
    try:
        directory = ensure_private_dir(wanted)
        probe_writable(directory)
        probe_writable(ensure_private_dir(directory / RECORDS_DIR))
    except (OSError, StorageFailed) as e:
        reason = e.details["reason"] if isinstance(e, StorageFailed) else os_error_reason(e)
        raise SystemExit(
            f"loomgate-gateway: the state dir {wanted} is not writable ({reason}); "
            "fix it or choose another with --state-dir"
        ) from None
    lock_state_dir(directory)
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
    config.ServerApp.jpserver_extensions = {"loomgate.gateway": True}
    config.ServerApp.identity_provider_class = "loomgate.gateway.auth.LoomIdentityProvider"
    config.ServerApp.tornado_settings = {"log_function": log_request}
    # Merged into traitlets' logging configuration of the application's logger.
    config.LoomgateServerApp.logging_config = {
        "filters": {"untrue": {"()": "loomgate.gateway.gateway_log.UntrueLines"}},
        "loggers": {LoomgateServerApp.__name__: {"filters": ["untrue"]}},
    }
    config.KernelRestarter.time_to_dead = 0.5
    # Kernels that outlive the gateway, and are taken back by the next one.
    config.KernelProvisionerFactory.default_provisioner_name = PROVISIONER_NAME
    config.LoomgateServerApp.loomgate_state_dir = str(directory)
    config.LoomgateServerApp.conversation_grace_seconds = args.conversation_grace
    config.LoomgateServerApp.idle_conversations = args.idle_conversations
    config.LoomgateServerApp.prewarm = args.prewarm
    config.LoomgateServerApp.retention_days = args.retention_days
    if args.kernel_spec is not None:
        config.MultiKernelManager.default_kernel_name = args.kernel_spec
    upstream_secrets = upstream.take_secrets(args) if args.upstream else None
    if args.upstream:
        upstream.configure(config, args)
        config.LoomgateServerApp.prewarm = 0  # idle kernels on someone's server: never
    app = LoomgateServerApp(config=config)
    monitor = monitor_token(directory)
    secrets = upstream_secrets.values() if upstream_secrets else []
    redact = RedactToken(token, monitor, *secrets)
    file_handler = GatewayLogFile(directory / LOG_FILE)
    file_handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    file_handler.setLevel(args.log_level)  # the loggers pass DEBUG on to every handler
    for logger in (app.log, logging.getLogger()):
        logger.addFilter(redact)
    file_handler.addFilter(redact)
    logging.getLogger("loomgate").addHandler(file_handler)
    app.initialize(argv=[], find_extensions=False)
    # After initialize: it reconfigures the application's logger, dropping earlier handlers.
    app.log.addHandler(file_handler)
    for handler in [*app.log.handlers, *logging.getLogger().handlers]:
        handler.addFilter(redact)
    # Set after initialize so that the token never appears in the (debug-logged) config.
    identity = app.identity_provider
    assert isinstance(identity, LoomIdentityProvider)  # the class the config above names
    identity.token = token
    identity.token_generated = False
    identity.monitor_token = monitor
    if upstream_secrets is not None:
        upstream.apply_secrets(upstream_secrets)
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
