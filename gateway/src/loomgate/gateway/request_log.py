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

    A refusal (a gone kernel's 503, a full disk's 507) is an answer, not a fault of the server:
    one WARNING line with its code, where jupyter_server would log a 5xx at ERROR with a dump
    of the request's headers.
    """
    status = handler.get_status()
    logger: logging.Logger = getattr(handler, "log", access_log)  # what jupyter_server logs to
    if (status < 300 or status == 304) and not logger.isEnabledFor(logging.DEBUG):
        prometheus_log_method(handler)
        return
    refusal = getattr(handler, "refusal", None)
    if refusal is not None and status >= 500:
        request = handler.request
        milliseconds = 1000.0 * request.request_time()
        # The path without its query: a token given as ?token= never reaches the log.
        logger.warning(
            "%d %s %s (%s) %.2fms", status, request.method, request.path, refusal, milliseconds
        )
        prometheus_log_method(handler)
        return
    jupyter_log_request(handler)
