"""The `loomgate-gateway` command (also `python -m loomgate.gateway`): the gateway's app, started
without the imports it never uses."""

from __future__ import annotations

import sys

# jsonschema checks the "iri" format with rfc3987_syntax whenever it is installed (it comes with
# jupyter_events' jsonschema[format-nongpl]), and that module builds ~35 Lark parsers at import:
# 1–2.4 s, most of the gateway's start. No Jupyter event schema uses an iri format; with the module
# marked missing, jsonschema leaves that one format unchecked (jsonschema issue 1428).
UNUSED_MODULES = ("rfc3987_syntax",)


def main(argv: list[str] | None = None) -> int:
    """Return the gateway's exit status, having run it until it stops."""
    for name in UNUSED_MODULES:
        # None marks a module 'not installed' for the import system; typeshed's type omits it.
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    from loomgate.gateway.app import main as run_gateway

    return run_gateway(argv)


if __name__ == "__main__":
    sys.exit(main())
