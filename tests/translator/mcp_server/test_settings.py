"""`loomgate-mcp`'s command line: parsed into Settings and rebuilt from them, both ways."""

from __future__ import annotations

import dataclasses

import pytest

from loomgate.translator.mcp_server.settings import Settings, SettingsError
from loomgate.translator.output_view import OutputLimits

SETTINGS = [
    Settings(),
    Settings(gateway="lab", kernel="analysis", quiet=True, autostart=False),
    Settings(
        gateway="http://127.0.0.1:9999",
        transport="streamable-http",
        host="0.0.0.0",
        port=9000,
        path="/x",
        result_mode="content",
        limits=OutputLimits(40, 5000),
        request_timeout=2.5,
    ),
]


def flags_only(settings: Settings) -> Settings:
    """Return `settings` with the parts that are not flags (cwd, env) blanked."""
    return dataclasses.replace(settings, cwd="", env={})


@pytest.mark.parametrize("settings", SETTINGS, ids=["defaults", "named", "everything"])
def test_argv_parses_back_to_the_same_settings(settings: Settings) -> None:
    parsed = Settings.from_args(settings.argv())
    assert flags_only(parsed) == flags_only(settings)


def test_no_flags_are_the_defaults() -> None:
    assert flags_only(Settings.from_args([])) == flags_only(Settings())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-lines", "1"], "--max-lines must be ≥ 2 and --max-chars ≥ 100"),
        (["--max-chars", "99"], "--max-lines must be ≥ 2 and --max-chars ≥ 100"),
        (["--request-timeout", "0"], "--request-timeout must be between 0 and 3600"),
        (["--request-timeout", "3601"], "--request-timeout must be between 0 and 3600"),
    ],
)
def test_values_that_cannot_work_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_args(argv)
    assert str(refused.value) == message


def test_cwd_names_the_kernels_directory(tmp_path: object) -> None:
    assert Settings.from_args(["--cwd", str(tmp_path)]).cwd == str(tmp_path)
    with pytest.raises(SettingsError, match="is not a directory"):
        Settings.from_args(["--cwd", f"{tmp_path}/missing"])
