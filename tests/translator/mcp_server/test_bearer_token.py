"""The bearer token of `loomgate-mcp` over HTTP: kept 0600 in the state dir, or the person's
from --token-env; the SDK's verifier compares it whole."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from loomgate.translator.mcp_server.bearer_token import (
    BearerToken,
    BearerTokenVerifier,
    bearer_token,
)
from loomgate.translator.mcp_server.settings import MCP_TOKEN_FILE, Settings, SettingsError


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The state dir, empty (it does not exist yet)."""
    directory = tmp_path / "state"
    monkeypatch.setenv("LOOMGATE_STATE_DIR", str(directory))
    return directory


def http(**changes: object) -> Settings:
    """Return HTTP settings with `changes`."""
    fields: dict[str, object] = {"cwd": "", "env": {}, "transport": "streamable-http"}
    return Settings(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_token_is_made_once_and_kept_0600(state: Path) -> None:
    made = bearer_token(http())
    assert made is not None and made.file == state / MCP_TOKEN_FILE and made.env is None
    assert len(made.value) >= 32
    assert stat.S_IMODE(made.file.stat().st_mode) == 0o600
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert made.file.read_text().strip() == made.value
    again = bearer_token(http())
    assert again == made  # hosts registered with it keep working across restarts


def test_a_kept_token_made_readable_by_others_is_made_private_again(state: Path) -> None:
    made = bearer_token(http())
    assert made is not None and made.file is not None
    made.file.chmod(0o644)
    assert bearer_token(http()) == made
    assert stat.S_IMODE(made.file.stat().st_mode) == 0o600


def test_token_env_takes_the_persons_token_out_of_the_environment(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERSONS_TOKEN", "  theirs-0123456789 ")
    settings = http(token_env="PERSONS_TOKEN", env={"PERSONS_TOKEN": "  theirs-0123456789 "})
    token = bearer_token(settings)
    assert token == BearerToken("theirs-0123456789", env="PERSONS_TOKEN")
    assert "PERSONS_TOKEN" not in os.environ and "PERSONS_TOKEN" not in settings.env
    assert not state.exists()


@pytest.mark.parametrize("value", ["", "   "], ids=["empty", "blank"])
def test_an_empty_token_env_is_refused(state: Path, value: str) -> None:
    with pytest.raises(SettingsError) as refused:
        bearer_token(http(token_env="PERSONS_TOKEN", env={"PERSONS_TOKEN": value}))
    assert str(refused.value) == (
        "--token-env PERSONS_TOKEN: $PERSONS_TOKEN is empty or unset; set it to the token hosts "
        f"will send, or leave --token-env out to use the one kept in {state / MCP_TOKEN_FILE}"
    )


def test_a_state_dir_that_cannot_keep_the_token_is_one_sentence(state: Path) -> None:
    state.write_text("a file where the state dir should be")
    with pytest.raises(SettingsError) as refused:
        bearer_token(http())
    assert str(refused.value) == (
        f"cannot keep the bearer token in {state / MCP_TOKEN_FILE} (File exists); make the "
        "state dir writable, or give --token-env NAME"
    )


def test_no_auth_has_no_token(state: Path) -> None:
    assert bearer_token(http(auth=False)) is None
    assert not state.exists()


def test_the_token_never_shows_in_its_repr() -> None:
    token = BearerToken("secret-value-0123", file=Path("/x/mcp_token"))
    assert "secret-value-0123" not in repr(token)
    assert "secret-value-0123" not in str(token)


@pytest.mark.parametrize(
    ("given", "accepted"),
    [
        ("the-token-0123456789", True),
        ("the-token-012345678", False),  # a prefix
        ("the-token-0123456789x", False),
        ("THE-TOKEN-0123456789", False),
        ("", False),
        ("é-not-ascii", False),
    ],
)
async def test_the_verifier_accepts_only_the_whole_token(given: str, accepted: bool) -> None:
    verifier = BearerTokenVerifier(BearerToken("the-token-0123456789"))
    access = await verifier.verify_token(given)
    assert (access is not None) is accepted
    if access is not None:
        assert access.scopes == [] and access.expires_at is None
