"""The access log of the server loomgate runs in, without its per-request cost."""

from __future__ import annotations

import logging

from jupyter_server.log import log_request as jupyter_log_request
from jupyter_server.prometheus.log_functions import prometheus_log_method
from tornado import web
from tornado.log import access_log


def log_request(handler: web.RequestHandler) -> None:
    """Log a request as jupyter_server does, without formatting a line no handler would write.

    jupyter_server logs successes at debug level, but builds the line (and scrubs its URL)
    for every request first.
    """
    status = handler.get_status()
    logger: logging.Logger = getattr(handler, "log", access_log)  # what jupyter_server logs to
    if (status < 300 or status == 304) and not logger.isEnabledFor(logging.DEBUG):
        prometheus_log_method(handler)
        return
    jupyter_log_request(handler)
