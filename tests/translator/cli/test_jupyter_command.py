"""`loomgate jupyter enable|disable` in temporary Jupyter dirs: what each writes and says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loomgate.translator.cli.main import main

INSTALL_NOTE = "loomgate must be installed in the environment that runs them"


@pytest.fixture
def person(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Return a Jupyter config dir of the test's own, read before the environment's."""
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jupyter-config"))
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "0")
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    return tmp_path / "jupyter-config"


@pytest.mark.parametrize(("action", "enabled"), [("enable", True), ("disable", False)])
def test_enable_and_disable_say_what_they_did_and_what_is_next(
    person: Path, action: str, enabled: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["jupyter", action]) == 0
    file = person / "jupyter_server_config.d" / "loomgate.gateway.json"
    assert json.loads(file.read_text())["ServerApp"]["jpserver_extensions"] == {
        "loomgate.gateway": enabled
    }
    said = capsys.readouterr().out.splitlines()
    verb = "enabled" if enabled else "disabled"
    assert said[0] == f"loomgate's Jupyter server extension is {verb} in {file}."
    # Installing loomgate where Jupyter runs is what enabling needs, not disabling.
    if enabled:
        assert said[1] == f"Restart running Jupyter servers for it to take effect; {INSTALL_NOTE}."
        assert said[2].startswith("Live cells: on;")  # on by default
        assert len(said) == 3
    else:
        assert said[1] == "Restart running Jupyter servers for it to take effect."
        assert len(said) == 2
