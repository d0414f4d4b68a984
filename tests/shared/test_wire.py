"""The wire contract's refusal codes, read from an answer as typed codes."""

from __future__ import annotations

import pytest

from loomgate.shared import wire


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"error": "busy", "message": "the kernel runs In [3]"}, "busy"),
        ({"error": "internal", "message": "the gateway failed (KeyError)"}, "internal"),
        ({"error": "storage_failed", "message": "disk full", "reason": "ENOSPC"}, "storage_failed"),
        ({"error": "not_a_code", "message": "a newer gateway's"}, None),
        ({"error": 404, "message": "a number, not a code"}, None),
        ({"message": "Kernel does not exist", "reason": "Not Found"}, None),  # jupyter_server's
        ({}, None),
    ],
)
def test_a_refusal_code_is_one_of_the_wire_codes(
    answer: dict[str, object], expected: wire.ErrorCode | None
) -> None:
    assert wire.refusal_code(answer) == expected


@pytest.mark.parametrize("code", wire.ERROR_CODES)
def test_every_wire_code_is_read_back(code: wire.ErrorCode) -> None:
    assert wire.refusal_code(wire.Refusal(error=code, message="")) == code
