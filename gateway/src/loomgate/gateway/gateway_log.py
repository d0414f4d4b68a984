"""The gateway's own log: its tokens never written, jupyter_server's lines that are untrue of
the gateway dropped, and a log file opened for each line."""

from __future__ import annotations

import logging
import os
from pathlib import Path


class RedactToken(logging.Filter):
    """Replace the gateway's tokens wherever they would appear in a log line."""

    def __init__(self, *tokens: str) -> None:
        super().__init__()
        self.tokens = tokens

    def filter(self, record: logging.LogRecord) -> bool:
        """Return True, after rewriting the record's message without the tokens."""
        message = record.getMessage()
        if any(token in message for token in self.tokens):
            for token in self.tokens:
                message = message.replace(token, "<token>")
            record.msg, record.args = message, None
        return True


class UntrueLines(logging.Filter):
    """Drop the lines jupyter_server logs that are not true of the gateway: Ctrl-C stops it and
    leaves the kernels running (the gateway's own line says so), with no confirmation."""

    UNTRUE = frozenset(
        {
            "Use Control-C to stop this server and shut down all kernels"
            " (twice to skip confirmation).",
        }
    )

    def filter(self, record: logging.LogRecord) -> bool:
        """Return False for a line of UNTRUE."""
        return not (isinstance(record.msg, str) and record.msg in self.UNTRUE)


class GatewayLogFile(logging.Handler):
    """The gateway's log file, opened for each line and closed again.

    Holding no descriptor open keeps the log rotatable and never pins the state dir's
    filesystem; a disk that refuses the file costs log lines, never a request.
    """

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def emit(self, record: logging.LogRecord) -> None:
        """Append `record` as one line (reporting a refused write on stderr)."""
        try:
            line = self.format(record) + "\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8", errors="replace"))
            finally:
                os.close(fd)
        except OSError:
            self.handleError(record)
