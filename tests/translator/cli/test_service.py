"""The service definitions `loomgate gateway install-service` writes, for each platform."""

from __future__ import annotations

import plistlib
import shlex
from pathlib import Path

import pytest

from loomgate.translator.cli.service import service_file
from loomgate.translator.client.local_gateway import gateway_command


@pytest.mark.parametrize("port", [None, 9123])
def test_systemd_unit_runs_the_gateway_and_spares_its_kernels(
    tmp_path: Path, port: int | None
) -> None:
    unit = service_file(tmp_path / "state", port, platform="linux")
    assert unit.path.name == "loomgate-gateway.service"
    lines = unit.text.splitlines()
    command = gateway_command(port=port, state_dir=tmp_path / "state")
    assert f"ExecStart={shlex.join(command)}" in lines
    assert {"Restart=on-failure", "KillMode=process", "WantedBy=default.target"} <= set(lines)
    assert unit.enable.endswith("systemctl --user enable --now loomgate-gateway.service")


def test_launchd_agent_runs_the_gateway_and_spares_its_kernels(tmp_path: Path) -> None:
    agent = service_file(tmp_path / "state", None, platform="darwin")
    assert agent.path.parts[-3:] == ("Library", "LaunchAgents", "dev.loomgate.gateway.plist")
    plist = plistlib.loads(agent.text.encode())
    assert plist["ProgramArguments"] == gateway_command(state_dir=tmp_path / "state")
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["AbandonProcessGroup"] is True  # stopping the agent leaves the kernels running
    assert agent.enable.startswith("launchctl bootstrap gui/$(id -u) ")
