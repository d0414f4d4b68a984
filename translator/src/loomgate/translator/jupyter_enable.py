"""How a person makes a Jupyter server of theirs reachable: the one sentence both the client's
error (a server without loomgate's extension) and presentation's listings end with."""

from __future__ import annotations

ENABLE_HINT = (
    "`loomgate jupyter enable` (or enable the loomgate.gateway server extension), "
    "then restart that server"
)
