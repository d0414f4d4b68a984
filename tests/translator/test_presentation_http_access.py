"""What a person reads about reaching `loomgate-mcp` over HTTP: the start line, the host's
registration, the sentence of a 401."""

from __future__ import annotations

import pytest

from loomgate.translator.presentation.http_access import (
    endpoint_url,
    http_auth_help,
    http_start_lines,
    registration_command,
    unauthorized,
)


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8801/mcp"),
        ("localhost", "http://localhost:8801/mcp"),
        ("::1", "http://[::1]:8801/mcp"),
    ],
)
def test_endpoint_url(host: str, url: str) -> None:
    assert endpoint_url(host, 8801, "/mcp") == url


@pytest.mark.parametrize(
    ("token_file", "token_env", "header"),
    [
        ("/s/mcp_token", None, '--header "Authorization: Bearer $(cat /s/mcp_token)"'),
        ("/my s/mcp_token", None, "--header \"Authorization: Bearer $(cat '/my s/mcp_token')\""),
        (None, "MCP_TOKEN", '--header "Authorization: Bearer $MCP_TOKEN"'),
    ],
    ids=["file", "file with a space", "variable"],
)
def test_registration_reads_the_token_when_it_runs(
    token_file: str | None, token_env: str | None, header: str
) -> None:
    command = registration_command("http://127.0.0.1:8801/mcp", token_file, token_env)
    assert command == f"claude mcp add --transport http loomgate http://127.0.0.1:8801/mcp {header}"


@pytest.mark.parametrize(
    ("token_file", "token_env", "where", "header"),
    [
        ("/s/mcp_token", None, "/s/mcp_token (mode 0600)", "$(cat /s/mcp_token)"),
        (None, "MCP_TOKEN", "$MCP_TOKEN", "$MCP_TOKEN"),
    ],
    ids=["file", "variable"],
)
def test_the_start_line_names_where_the_token_is_then_the_registration(
    token_file: str | None, token_env: str | None, where: str, header: str
) -> None:
    first, second = http_start_lines(
        "http://127.0.0.1:8801/mcp", token_file=token_file, token_env=token_env
    ).split("\n")
    assert first == (
        "loomgate-mcp: serving MCP at http://127.0.0.1:8801/mcp; every request needs "
        f'"Authorization: Bearer <token>", the token in {where}. Register it with:'
    )
    assert second == (
        "claude mcp add --transport http loomgate http://127.0.0.1:8801/mcp "
        f'--header "Authorization: Bearer {header}"'
    )


def test_the_start_line_of_no_auth_says_what_it_lets_in() -> None:
    line = http_start_lines("http://127.0.0.1:8801/mcp", token_file=None, token_env=None)
    assert line == (
        "loomgate-mcp: serving MCP at http://127.0.0.1:8801/mcp without authentication "
        "(--no-auth): any process on this machine that reaches it can run code in your kernels."
    )


def test_help_says_how_a_host_sends_the_token() -> None:
    assert http_auth_help("/s/mcp_token").split("\n") == [
        'Over --transport streamable-http every request needs "Authorization: Bearer <token>".',
        "The token is made once and kept (mode 0600) in",
        "  /s/mcp_token",
        "unless --token-env NAME names the variable that holds yours. A host registers the",
        "server with, for example:",
        "  claude mcp add --transport http loomgate http://127.0.0.1:8801/mcp "
        '--header "Authorization: Bearer $(cat /s/mcp_token)"',
        "--no-auth serves without a token, on a loopback --host only.",
    ]


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        (
            False,
            'loomgate-mcp needs the header "Authorization: Bearer <token>", with the token in '
            "the file or variable its start line names.",
        ),
        (
            True,
            "loomgate-mcp refused the bearer token: send the one in the file or variable its "
            'start line names, as "Authorization: Bearer <token>".',
        ),
    ],
    ids=["no header", "a wrong token"],
)
def test_a_401_is_one_sentence_naming_the_header(sent: bool, expected: str) -> None:
    sentence = unauthorized(sent)
    assert sentence.endswith(".") and ". " not in sentence and "\n" not in sentence
    assert sentence == expected
