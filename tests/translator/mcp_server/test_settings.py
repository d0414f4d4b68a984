"""`loomgate-mcp`'s command line: parsed into Settings and rebuilt from them, both ways."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from loomgate.translator.mcp_server.settings import Settings, SettingsError, parser
from loomgate.translator.output_view import OutputLimits

SETTINGS = [
    Settings(),
    Settings(gateway="lab", kernel="analysis", output_schemas=True, quiet=True, autostart=False),
    Settings(
        gateway="http://127.0.0.1:9999",
        transport="streamable-http",
        host="0.0.0.0",
        port=9000,
        path="/x",
        result_mode="content",
        limits=OutputLimits(40, 5000),
        request_timeout=2.5,
        token_env="MCP_TOKEN",
    ),
    Settings(transport="streamable-http", host="::1", auth=False),
]


def flags_only(settings: Settings) -> Settings:
    """Return `settings` with the parts that are not flags (cwd, env) blanked."""
    return dataclasses.replace(settings, cwd="", env={})


@pytest.mark.parametrize("settings", SETTINGS, ids=["defaults", "named", "everything", "no-auth"])
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


HTTP = ["--transport", "streamable-http"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [*HTTP, "--no-auth", "--host", "0.0.0.0"],
            "--no-auth is refused with --host 0.0.0.0: anyone who reaches that address could "
            "run code in your kernels; drop --no-auth (a bearer token is then required) or bind "
            "a loopback --host",
        ),
        (
            [*HTTP, "--no-auth", "--host", "192.168.1.5"],
            "--no-auth is refused with --host 192.168.1.5: anyone who reaches that address "
            "could run code in your kernels; drop --no-auth (a bearer token is then required) "
            "or bind a loopback --host",
        ),
        (
            [*HTTP, "--no-auth", "--token-env", "T"],
            "--no-auth and --token-env exclude each other: give one",
        ),
        (
            ["--no-auth"],
            "--no-auth is for --transport streamable-http; over stdio the host starts the server",
        ),
        (
            ["--token-env", "T"],
            "--token-env is for --transport streamable-http; over stdio the host starts the server",
        ),
    ],
    ids=["every address", "a LAN address", "both", "no-auth on stdio", "token-env on stdio"],
)
def test_http_auth_flags_that_cannot_work_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.from_args(argv)
    assert str(refused.value) == message


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_no_auth_is_accepted_on_loopback(host: str) -> None:
    assert not Settings.from_args([*HTTP, "--no-auth", "--host", host]).auth


def test_a_token_is_required_by_default_also_on_every_address() -> None:
    settings = Settings.from_args([*HTTP, "--host", "0.0.0.0"])
    assert settings.auth and settings.token_env is None


def test_cwd_names_the_kernels_directory(tmp_path: object) -> None:
    assert Settings.from_args(["--cwd", str(tmp_path)]).cwd == str(tmp_path)
    with pytest.raises(SettingsError, match="is not a directory"):
        Settings.from_args(["--cwd", f"{tmp_path}/missing"])


def help_text() -> str:
    """Return `loomgate-mcp --help` with its white space folded (terminal widths differ)."""
    return " ".join(parser().format_help().split())


HELP = [
    "usage: loomgate-mcp ",
    " MCP server for persistent, inspectable Jupyter kernels on a loomgate gateway. ",
    "--gateway GATEWAY a gateways.toml name or a URL (default: local)",
    "--kernel KERNEL attach to this kernel (name or id prefix) at first use",
    "--cwd CWD working directory of the kernels this server creates (default: its own; for "
    "hosts that cannot set one)",
    "--transport {stdio,streamable-http} (stdio)",
    "--host HOST HTTP bind address (127.0.0.1)",
    "--port PORT HTTP port (8801)",
    "--path PATH HTTP path (/mcp)",
    "--token-env NAME HTTP: the bearer token hosts send is in this environment variable "
    "(default: one made once and kept in the state dir)",
    "--no-auth HTTP: serve without a bearer token (refused with a non-loopback --host)",
    'Over --transport streamable-http every request needs "Authorization: Bearer <token>".',
    "--no-auth serves without a token, on a loopback --host only.",
    "--result-mode {structured,content} structured: text plus structuredContent (default); "
    "content: text only",
    "--output-schemas structured mode: also list each tool's outputSchema, for hosts that "
    "validate or type structuredContent (about 7,000 more characters of tools/list)",
    "--quiet do not show what startup.py printed (its failures still show)",
    "--no-autostart never start the local gateway",
    "--max-lines MAX_LINES lines of a cell's output before head/tail (200)",
    "--max-chars MAX_CHARS characters before head/tail (20000)",
    "--request-timeout SECONDS how long the gateway may take to answer a request (",
]


@pytest.mark.parametrize("shown", HELP)
def test_help_says_what_each_flag_does_and_its_default(shown: str) -> None:
    assert shown in help_text()


def test_help_gives_the_hosts_registration_with_the_kept_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOOMGATE_STATE_DIR", str(tmp_path / "my state"))
    kept = f"'{tmp_path}/my state/mcp_token'"
    assert (
        "claude mcp add --transport http loomgate http://127.0.0.1:8801/mcp "
        f'--header "Authorization: Bearer $(cat {kept})"'
    ) in help_text()


def test_help_gives_the_request_timeout_in_seconds() -> None:
    timeout = Settings().request_timeout
    assert f"answer a request ({timeout:g})" in help_text()


@pytest.mark.parametrize(
    "argv",
    [["--transport", "tcp"], ["--result-mode", "html"], ["--port", "http"], ["--unknown"]],
)
def test_flags_outside_their_choices_are_refused(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        Settings.from_args(argv)
    assert refused.value.code == 2
    assert "usage: loomgate-mcp" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "limits", "timeout"),
    [
        (["--max-lines", "2", "--max-chars", "100"], OutputLimits(2, 100), None),
        (["--request-timeout", "3600"], OutputLimits(), 3600.0),
        (["--request-timeout", "0.5"], OutputLimits(), 0.5),
        (["--request-timeout", "1"], OutputLimits(), 1.0),
    ],
    ids=["smallest limits", "longest timeout", "sub-second timeout", "one second"],
)
def test_values_at_the_edges_are_accepted(
    argv: list[str], limits: OutputLimits, timeout: float | None
) -> None:
    settings = Settings.from_args(argv)
    assert settings.limits == limits
    assert settings.request_timeout == (Settings().request_timeout if timeout is None else timeout)


def test_the_kernels_directory_defaults_to_the_servers_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Settings.from_args([]).cwd == str(tmp_path.resolve())


def test_a_relative_or_home_cwd_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings.from_args(["--cwd", "work"]).cwd == str((tmp_path / "work").resolve())
    assert Settings.from_args(["--cwd", "~/work"]).cwd == str((tmp_path / "work").resolve())
    with pytest.raises(SettingsError) as refused:
        Settings.from_args(["--cwd", "missing"])
    assert str(refused.value) == "--cwd missing is not a directory"
