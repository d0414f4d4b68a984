"""loomgate.gateway: the resident Jupyter Server that owns kernels and execution records.

Also a jupyter_server extension: `jupyter server extension enable loomgate.gateway` makes a
person's own JupyterLab or Jupyter Server a gateway (see extension.py).
"""

from __future__ import annotations

__version__ = "0.1.0"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Return the module jupyter_server links and loads when this package is enabled."""
    return [{"module": "loomgate.gateway.extension"}]
