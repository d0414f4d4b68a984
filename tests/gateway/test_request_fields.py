"""A request body's fields: one an endpoint does not take is refused in one sentence before the
endpoint runs (a misspelt `kernel_spec` must not start a plain kernel)."""

from __future__ import annotations

from typing import Any

import pytest

from loomgate.gateway.handlers.answers import Answer, answered
from loomgate.gateway.handlers.call import Call
from loomgate.gateway.handlers.kernels import CREATE_FIELDS
from loomgate.gateway.handlers.table import ROUTES

BODY_METHODS = ("POST", "PUT")


def call(method: str, body: dict[str, Any]) -> Call:
    """Return a call of `method` carrying `body` (no gateway behind it)."""
    return Call({}, method, "kernels", {}, {}, body=body)


@pytest.mark.parametrize(
    ("body", "refusal"),
    [
        (
            {"name": "k", "kernelspec": "bash"},
            "unknown field 'kernelspec' in the request; it takes cwd, env, fork, kernel_spec, "
            "lifetime, name, open_to_agents, sandbox, stricter_only",
        ),
        (
            {"kernel": "k", "spec": "bash"},
            "unknown fields 'kernel', 'spec' in the request; it takes cwd, env, fork, kernel_spec, "
            "lifetime, name, open_to_agents, sandbox, stricter_only",
        ),
    ],
)
async def test_a_field_an_endpoint_does_not_take_is_refused_before_it_runs(
    body: dict[str, Any], refusal: str
) -> None:
    ran: list[Call] = []

    async def endpoint(call: Call) -> Answer:
        ran.append(call)
        return 201, {}

    status, answer = await answered(call("POST", body), endpoint, CREATE_FIELDS)
    assert (status, answer) == (400, {"error": "bad_request", "message": refusal})
    assert ran == []


def test_the_fields_an_endpoint_takes_pass() -> None:
    call("POST", {"name": "k", "kernel_spec": "bash"}).refuse_unknown(CREATE_FIELDS)
    call("POST", {}).refuse_unknown(frozenset())  # a body-less reset
    call("GET", {"anything": 1}).refuse_unknown(frozenset())  # a GET's body is ignored


def test_every_method_with_a_body_says_what_it_takes() -> None:
    missing = [
        f"{method} {route.name}"
        for route in ROUTES
        for method in route.endpoints
        if method in BODY_METHODS and method not in route.takes
    ]
    assert missing == []
