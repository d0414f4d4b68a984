"""The client's errors (tables): one class per refusal code of the wire, built from the answer's
`error` field, and every answer the session decodes turned into its result or its error."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.shared import wire
from loomgate.translator.client import errors
from loomgate.translator.client.errors import (
    REFUSALS,
    AuthFailed,
    Busy,
    GatewayError,
    NoExtension,
    NotFound,
    ProtocolError,
    Refused,
    Unavailable,
    Unreachable,
    refusal,
)
from loomgate.translator.client.session import GatewaySession
from loomgate.translator.jupyter_enable import ENABLE_HINT


def test_every_refusal_code_of_the_wire_has_its_class() -> None:
    assert sorted(REFUSALS) == sorted(wire.ERROR_CODES)
    for code, cls in REFUSALS.items():
        assert issubclass(cls, Refused) and cls.code == code


@pytest.mark.parametrize("code", wire.ERROR_CODES)
def test_a_refusal_is_built_from_its_error_field(code: str) -> None:
    error = refusal({"error": code, "message": "no.", "kernel_id": "k1"}, 409)
    assert type(error) is REFUSALS[code]
    assert (error.code, error.message, error.status) == (code, "no.", 409)
    assert error.details == {"kernel_id": "k1"} and str(error) == "no."


def test_a_code_this_translator_does_not_know_is_a_plain_refusal() -> None:
    error = refusal({"error": "quota", "message": "too many kernels"}, 429)
    assert type(error) is Refused and error.code == "quota" and error.status == 429
    assert Busy("x").code == "busy"  # the class's own code is untouched


def test_the_hierarchy_lets_callers_catch_what_they_mean() -> None:
    assert isinstance(Busy("x"), Refused) and isinstance(Busy("x"), GatewayError)
    assert isinstance(NoExtension("x"), ProtocolError)
    assert not isinstance(Unreachable("x"), Refused)
    assert Unreachable("x", details={"refused": True}).refused
    assert not Unreachable("x").refused
    assert repr(NotFound("gone", status=404)) == "NotFound('not_found', 'gone', status=404)"


def test_every_error_class_says_what_it_means() -> None:
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, GatewayError)
    ]
    assert len(classes) >= 16
    assert all(cls.__doc__ for cls in classes)


SESSION = GatewaySession("http://127.0.0.1:9", "s3cret", name="box")


@pytest.mark.parametrize(
    ("status", "data", "expected", "words"),
    [
        (404, {"error": "not_found", "message": "no kernel x"}, NotFound, "no kernel x"),
        (503, {"error": "unavailable", "message": "dead", "kernel_id": "k"}, Unavailable, "dead"),
        (401, None, AuthFailed, "refused the token"),
        (403, {"reason": "Forbidden"}, AuthFailed, "refused the token it was given"),
        (404, {"reason": "Not Found", "message": None}, NoExtension, ENABLE_HINT),
        (405, None, ProtocolError, "is not a loomgate gateway"),
        (502, None, Unreachable, "its proxy answered HTTP 502"),
        (504, "text", Unreachable, "is it running?"),
        (418, None, ProtocolError, "answered HTTP 418 to GET /api/loomgate/info"),
        (200, ["not", "an", "object"], ProtocolError, "not a JSON object"),
        (200, None, ProtocolError, "not a JSON object"),
    ],
)
def test_every_answer_is_decoded_one_way(
    status: int, data: Any, expected: type[GatewayError], words: str
) -> None:
    with pytest.raises(GatewayError) as raised:
        SESSION._decode(status, data, "GET", "info")
    assert type(raised.value) is expected
    assert words in str(raised.value) and raised.value.status == status
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize("status", [200, 201, 204])
def test_a_successful_object_is_the_result(status: int) -> None:
    assert SESSION._decode(status, {"ok": True}, "GET", "info") == {"ok": True}
