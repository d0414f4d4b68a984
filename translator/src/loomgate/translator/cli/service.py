"""`loomgate gateway install-service`: the gateway as a login service (systemd or launchd).

The service manager starts the gateway at login and again after a failure. Stopping or
restarting the service stops only the gateway: the kernels keep running (systemd's
`KillMode=process`, launchd's `AbandonProcessGroup`) and the next start takes them back.
"""

from __future__ import annotations

import os
import plistlib
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from loomgate.shared.paths import DAEMON_LOG
from loomgate.translator.client.local_gateway import gateway_command

UNIT_NAME = "loomgate-gateway.service"
AGENT_LABEL = "dev.loomgate.gateway"


@dataclass(frozen=True)
class ServiceFile:
    """A service definition: where it goes, what it says, and how to turn it on."""

    path: Path
    text: str
    enable: str


def systemd_unit(command: list[str], home: Path) -> ServiceFile:
    """Return a systemd user unit that runs `command` (Linux)."""
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    text = "\n".join(
        [
            "[Unit]",
            "Description=loomgate gateway: persistent Jupyter kernels for agents and people",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={shlex.join(command)}",
            f"WorkingDirectory={home}",
            "Restart=on-failure",
            "RestartSec=2",
            "# Stopping the service stops the gateway, not its kernels: the next start takes",
            "# them back (loomgate gateway stop ends them).",
            "KillMode=process",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )
    return ServiceFile(
        config / "systemd" / "user" / UNIT_NAME,
        text,
        f"systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}",
    )


def launchd_agent(command: list[str], home: Path, state_dir: Path) -> ServiceFile:
    """Return a launchd agent that runs `command` (macOS)."""
    log = str(state_dir / DAEMON_LOG)
    agent = {
        "Label": AGENT_LABEL,
        "ProgramArguments": command,
        "WorkingDirectory": str(home),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "AbandonProcessGroup": True,
        "StandardOutPath": log,
        "StandardErrorPath": log,
    }
    path = home / "Library" / "LaunchAgents" / f"{AGENT_LABEL}.plist"
    text = plistlib.dumps(agent).decode()
    return ServiceFile(path, text, f"launchctl bootstrap gui/$(id -u) {shlex.quote(str(path))}")


def service_file(state_dir: Path, port: int | None, platform: str = sys.platform) -> ServiceFile:
    """Return the service definition for this platform."""
    command = gateway_command(port=port, state_dir=state_dir)
    home = Path.home()
    if platform == "darwin":
        return launchd_agent(command, home, state_dir)
    return systemd_unit(command, home)


def install_service(state_dir: Path, port: int | None, *, print_only: bool) -> int:
    """Write (or with `print_only` print) the service definition; return the exit status."""
    service = service_file(state_dir, port)
    if print_only:
        sys.stdout.write(service.text)
        print(f"# write it to {service.path}, then: {service.enable}", file=sys.stderr)
        return 0
    service.path.parent.mkdir(parents=True, exist_ok=True)
    service.path.write_text(service.text, encoding="utf-8")
    print(f"wrote {service.path}\nturn it on with: {service.enable}")
    return 0
