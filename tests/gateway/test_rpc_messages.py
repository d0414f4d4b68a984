"""The rpc websocket's messages and the route table, without a gateway: what a message asks
for, how its query is read, and which endpoint a path is."""

from __future__ import annotations

from typing import Any

import pytest
from tornado import web

from loomgate.gateway.errors import BadRequest
from loomgate.gateway.handlers import executions, kernels
from loomgate.gateway.handlers.call import Call
from loomgate.gateway.handlers.rpc import parse_request, query_value
from loomgate.gateway.handlers.table import ROUTES, find


@pytest.mark.parametrize(
    ("method", "path", "endpoint", "arguments"),
    [
        ("GET", "info", kernels.info, {}),
        ("POST", "kernels", kernels.create_kernel, {}),
        ("DELETE", "kernels/k1", kernels.stop_kernel, {"ref": "k1"}),
        ("PUT", "kernels/k1/setup", kernels.setup, {"ref": "k1"}),
        ("GET", "kernels/a%2Fb/executions/3", executions.follow, {"ref": "a/b", "selector": "3"}),
        ("GET", "kernels/k/executions/3/streams/stdout", executions.read_stream,
         {"ref": "k", "selector": "3", "stream": "stdout"}),
        ("POST", "kernels/k/executions/current/input", executions.answer_input,
         {"ref": "k", "selector": "current"}),
    ],
)  # fmt: skip
def test_a_path_finds_its_endpoint(
    method: str, path: str, endpoint: object, arguments: dict[str, str]
) -> None:
    _, found, given = find(method, path)
    assert (found, given) == (endpoint, arguments)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "nope", 404),
        ("GET", "kernels/", 404),
        ("GET", "kernels/k/executions/3/streams", 404),
        ("GET", "events", 404),
        ("DELETE", "info", 405),
        ("GET", "kernels/k/interrupt", 405),
        ("POST", "kernels/k/setup", 405),
        ("GET", "kernels/%FF", 400),
    ],
)
def test_a_path_that_is_no_endpoint_is_refused_as_http_refuses_it(
    method: str, path: str, status: int
) -> None:
    with pytest.raises(web.HTTPError) as refused:
        find(method, path)
    assert refused.value.status_code == status


def test_every_route_has_a_handler_name_and_endpoints() -> None:
    assert len({route.name for route in ROUTES}) == len(ROUTES)
    assert len({route.handler for route in ROUTES}) == len(ROUTES)
    assert all(route.endpoints and route.handler.endswith("Handler") for route in ROUTES)


@pytest.mark.parametrize(
    ("value", "read"),
    [(" a\x01b ", "a b"), ("x", "x"), (3, "3"), (0.5, "0.5"), (True, "true"), (False, "false")],
)
def test_a_query_value_is_read_as_http_reads_it(value: object, read: str) -> None:
    assert query_value(value) == read


@pytest.mark.parametrize(
    ("message", "method", "path", "query", "body"),
    [
        ({"method": "GET", "path": "kernels/k/executions/2", "query": {"wait": 5, "x": None}},
         "GET", {"ref": "k", "selector": "2"}, {"wait": "5"}, None),
        ({"method": "POST", "path": "/kernels/k/executions", "body": {"code": "1"}},
         "POST", {"ref": "k"}, {}, {"code": "1"}),
    ],
)  # fmt: skip
def test_a_message_asks_for_its_endpoint(
    message: dict[str, Any], method: str, path: dict[str, str], query: Any, body: Any
) -> None:
    request = parse_request({"id": 1, **message})
    assert (request.method, dict(request.path), dict(request.query), request.body) == (
        method,
        path,
        query,
        body,
    )


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ({}, "method and path"),
        ({"method": "PATCH", "path": "info"}, "method must be one of GET, POST, PUT, DELETE"),
        ({"method": "GET", "path": ["info"]}, "path must be a string"),
        ({"method": "GET", "path": "info#x"}, "query apart"),
        ({"method": "GET", "path": "info", "query": {"a": {}}}, "query must be an object"),
        # The first shape of call (no client sends it): refused as any call without both.
        ({"call": "submit", "kernel": "k", "args": {"code": "1"}}, "method and path"),
        ({"call": "follow", "kernel": "k", "execution": "latest"}, "method and path"),
    ],
)
def test_a_bad_message_is_refused_in_one_sentence(message: dict[str, Any], words: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse_request({"id": 1, **message})
    assert words in refused.value.message


def call(query: dict[str, object], method: str = "GET", body: object = None) -> Call:
    """Return a call with these arguments (no gateway behind it)."""
    return Call({}, method, "test", {}, query, body=body)


@pytest.mark.parametrize(
    ("raw", "value", "refusal"),
    [
        (None, 7, None),
        ("", 7, None),
        ("12", 12, None),
        (12.9, 12, None),  # a JSON number in a body: truncated, as before
        ("1.5", None, "n must be an integer, not '1.5'"),
        ("-1", None, "n must be between 0 and 100, not '-1'"),
        (True, None, "n must be between 0 and 100, not True"),
        ([1], None, "n must be an integer, not [1]"),
    ],
)
def test_an_integer_argument(raw: object, value: int | None, refusal: str | None) -> None:
    query = {} if raw is None else {"n": raw}
    if refusal is None:
        assert call(query).int_arg("n", 7, hi=100) == value
    else:
        with pytest.raises(BadRequest) as refused:
            call(query).int_arg("n", 7, hi=100)
        assert refused.value.message == refusal


@pytest.mark.parametrize(
    ("raw", "value", "refusal"),
    [
        (None, None, None),
        ("2.5", 2.5, None),
        ("soon", None, "wait must be a number, not 'soon'"),
        ("nan", None, "wait must be between 0 and 3600, not 'nan'"),
        ("4000", None, "wait must be between 0 and 3600, not '4000'"),
    ],
)
def test_a_numeric_argument(raw: object, value: float | None, refusal: str | None) -> None:
    query = {} if raw is None else {"wait": raw}
    if refusal is None:
        assert call(query).float_arg("wait", None, hi=3600) == value
    else:
        with pytest.raises(BadRequest) as refused:
            call(query).float_arg("wait", None, hi=3600)
        assert refused.value.message == refusal


def test_a_body_gives_arguments_only_where_the_method_has_one() -> None:
    assert call({"a": "query"}, "POST", {"a": "body"}).arg("a") == "body"
    assert call({"a": "query"}, "POST", {"b": "body"}).arg("a") == "query"
    assert call({"a": "query"}, "GET", {"a": "body"}).arg("a") == "query"
    assert call({}, "POST").body == {}
    with pytest.raises(BadRequest, match="must be a JSON object"):
        call({}, "POST", [1]).arg("a")
    with pytest.raises(BadRequest, match="not valid JSON"):
        Call({}, "POST", "test", {}, {}, raw_body=b"{").arg("a")
