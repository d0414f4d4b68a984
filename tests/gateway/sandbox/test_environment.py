"""The environment a confined kernel inherits: the gateway's, without its secrets."""

from __future__ import annotations

import pytest

from loomgate.gateway.sandbox.policy.environment import confined_environment, is_secret


@pytest.mark.parametrize(
    "name",
    [
        "LOOMGATE_TOKEN",
        "LOOMGATE_UPSTREAM_HEADERS",
        "JUPYTER_TOKEN",
        "JPY_API_TOKEN",
        "SSH_AUTH_SOCK",
        "DBUS_SESSION_BUS_ADDRESS",
        "GPG_AGENT_INFO",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "OPENAI_API_KEY",
        "HF_TOKEN",
        "DJANGO_SECRET_KEY",
        "PGPASSWORD",
        "MYSQL_PWD",
        "MY_SERVICE_SECRET",
        "STRIPE_SECRET_LIVE",
        "github_token",
    ],
)
def test_secrets(name: str) -> None:
    assert is_secret(name)


@pytest.mark.parametrize(
    "name",
    ["PATH", "HOME", "LANG", "TOKENIZERS_PARALLELISM", "JPY_PARENT_PID", "LOOMGATE_URL", "TERM"],
)
def test_not_secrets(name: str) -> None:
    assert not is_secret(name)


def test_confined_environment_drops_the_secrets_and_the_token_env() -> None:
    env = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "GH_TOKEN": "ghp_x",
        "SSH_AUTH_SOCK": "/run/user/1000/ssh",
        "MY_GATEWAY_KEY": "k",
    }
    assert confined_environment(env, ["MY_GATEWAY_KEY"]) == {"PATH": "/usr/bin", "HOME": "/home/u"}
    assert confined_environment(env, iter(["MY_GATEWAY_KEY"])) == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
    }
    assert "MY_GATEWAY_KEY" in confined_environment(env)
    assert env["GH_TOKEN"] == "ghp_x"  # the given mapping is left as it was


@pytest.mark.parametrize(
    ("name", "value", "kept"),
    [
        ("UV_INDEX_URL", "https://user:SECRET@index.example/simple", False),
        ("PIP_EXTRA_INDEX_URL", "https://pypi.org/simple https://u:p@extra.example/s", False),
        ("DATABASE_URL", "postgres://app:pw@db.internal/app", False),
        ("UV_INDEX_URL", "https://index.example/simple", True),
        ("PIP_INDEX_URL", "https://pypi.org/simple", True),
    ],
)
def test_a_value_that_carries_a_urls_credentials_is_dropped(
    name: str, value: str, kept: bool
) -> None:
    env = {"PATH": "/usr/bin", name: value}
    assert confined_environment(env) == (env if kept else {"PATH": "/usr/bin"})
