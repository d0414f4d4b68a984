"""loomgate.gateway: the resident Jupyter Server that owns kernels and execution records."""

from __future__ import annotations

__version__ = "0.1.0"
