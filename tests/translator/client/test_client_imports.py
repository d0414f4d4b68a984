"""Importing the gateway client costs no protocol library: websockets is imported only when an
rpc opens, httpx only for an https gateway."""

from __future__ import annotations

from tests.support.imports import imported_modules


def test_importing_the_client_costs_no_websockets() -> None:
    modules = imported_modules("-c", "import loomgate.translator.client.connection")
    assert "loomgate.translator.client.rpc" in modules
    assert {name.partition(".")[0] for name in modules} & {"websockets", "httpx", "h11"} == set()
