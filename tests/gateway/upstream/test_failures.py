"""What an upstream failure is called: one sentence naming the upstream and the cause, for each
way a request can fail (table-driven), and the checks of the --upstream options."""

from __future__ import annotations

import argparse
import socket
import ssl
from io import BytesIO

import pytest
from tornado import web
from tornado.httpclient import HTTPClientError, HTTPRequest, HTTPResponse

from loomgate.gateway.errors import NotFound, Unavailable
from loomgate.gateway.upstream import options
from loomgate.gateway.upstream.failures import describe

URL = "https://hub.example.org/user/ada"


def answered(code: int, body: bytes) -> HTTPClientError:
    """Return the error of a request the upstream answered with `code` and `body`."""
    response = HTTPResponse(HTTPRequest(URL), code, buffer=BytesIO(body))
    return HTTPClientError(code, response=response)


def wrapped(cause: BaseException) -> web.HTTPError:
    """Return `cause` as jupyter_server's gateway client raises it (an HTTPError from it)."""
    try:
        raise web.HTTPError(503, "ConnectionError was received from Gateway server") from cause
    except web.HTTPError as e:
        return e


FAILURES = [
    (
        wrapped(ConnectionRefusedError()),
        Unavailable,
        f"the upstream at {URL} refused the connection",
    ),
    (socket.gaierror(-2, "Name or service not known"), Unavailable, "cannot be found"),
    (ssl.SSLCertVerificationError(1, "self-signed certificate"), Unavailable, "set verify = false"),
    (HTTPClientError(599, "Timeout while connecting"), Unavailable, "did not answer in time"),
    (HTTPClientError(599, "Stream closed"), Unavailable, "could not be reached (Stream closed)"),
    (answered(403, b'{"message": "Forbidden"}'), Unavailable, "refused the token in $HUB_TOKEN"),
    (answered(401, b""), Unavailable, "refused the token in $HUB_TOKEN"),
    (
        answered(403, b'{"message": "A max kernels limit has been set to 1"}'),
        Unavailable,
        "refused: A max kernels limit has been set to 1 (HTTP 403)",
    ),
    (answered(404, b'{"message": "Kernel does not exist: x"}'), NotFound, "has no such kernel"),
    (answered(500, b"oops"), Unavailable, "refused: Internal Server Error (HTTP 500)"),
]


@pytest.mark.parametrize(("error", "kind", "said"), FAILURES)
def test_each_failure_is_one_sentence_naming_the_upstream(
    error: BaseException, kind: type, said: str
) -> None:
    refusal = describe(error, URL, "HUB_TOKEN")
    assert isinstance(refusal, kind)
    assert refusal.message.startswith(f"the upstream at {URL} "), refusal.message
    assert said in refusal.message, refusal.message
    assert "\n" not in refusal.message


def test_a_refused_request_without_a_token_says_how_to_give_one() -> None:
    refusal = describe(answered(403, b""), URL, None)
    assert "it needs a token (--upstream-token-env VAR, or token_env in gateways.toml)" in (
        refusal.message
    )


def arguments(*argv: str) -> argparse.Namespace:
    """Return the parsed upstream options."""
    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("argv", "env", "problem"),
    [
        ((), {}, None),
        (("--upstream", "http://127.0.0.1:8888"), {}, None),
        (("--upstream-token-env", "T"), {"T": "x"}, "--upstream-… options need --upstream URL"),
        (("--upstream", "hub.example.org"), {}, "must be an http:// or https:// URL"),
        (("--upstream", URL, "--upstream-token-env", "T"), {}, "$T is empty or unset"),
        (("--upstream", URL, "--upstream-headers-env", "H"), {"H": "{"}, "$H is not JSON"),
        (
            ("--upstream", URL, "--upstream-headers-env", "H"),
            {"H": '{"X": 1}'},
            "$H must be a JSON object of strings",
        ),
        (("--upstream", URL, "--upstream-headers-env", "H"), {"H": '{"X": "y"}'}, None),
    ],
)
def test_upstream_options_are_checked(
    argv: tuple[str, ...], env: dict[str, str], problem: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    found = options.check(arguments(*argv))
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found, found
