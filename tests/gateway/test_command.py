"""The `loomgate-gateway` command starts without the imports it never uses."""

from __future__ import annotations

from tests.support.imports import imported_modules


def test_the_gateway_never_builds_the_iri_parsers() -> None:
    modules = imported_modules("-m", "loomgate.gateway", "--help")
    assert "jupyter_server.serverapp" in modules and "jsonschema._format" in modules
    # rfc3987_syntax builds ~35 Lark parsers at import (1–2.4 s); see loomgate/gateway/__main__.py
    assert "rfc3987_syntax.syntax_helpers" not in modules
    assert "lark" not in modules
