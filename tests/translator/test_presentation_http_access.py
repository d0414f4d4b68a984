"""What a person reads about reaching `loomgate-mcp` over HTTP: the start line, the host's
registration, the sentence of a 401."""

from __future__ import annotations

import pytest

from loomgate.translator.presentation.http_access import (
    endpoint_url,
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


def test_the_start_line_names_where_the_token_is_then_the_registration() -> None:
    first, second = http_start_lines(
        "http://127.0.0.1:8801/mcp", token_file="/s/mcp_token", token_env=None
    ).split("\n")
    assert first == (
        "loomgate-mcp: serving MCP at http://127.0.0.1:8801/mcp; every request needs "
        '"Authorization: Bearer <token>", the token in /s/mcp_token (mode 0600). Register it with:'
    )
    assert second == registration_command("http://127.0.0.1:8801/mcp", "/s/mcp_token", None)


def test_the_start_line_of_no_auth_says_what_it_lets_in() -> None:
    line = http_start_lines("http://127.0.0.1:8801/mcp", token_file=None, token_env=None)
    assert "\n" not in line
    assert "without authentication (--no-auth)" in line
    assert "can run code in your kernels" in line


@pytest.mark.parametrize("sent", [False, True])
def test_a_401_is_one_sentence_naming_the_header(sent: bool) -> None:
    sentence = unauthorized(sent)
    assert sentence.endswith(".") and ". " not in sentence and "\n" not in sentence
    assert '"Authorization: Bearer <token>"' in sentence
