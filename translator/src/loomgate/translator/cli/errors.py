"""A mistake on the command line: said in one line, exit status 2."""

from __future__ import annotations


class UsageError(Exception):
    """A command-line mistake (exit status 2)."""
