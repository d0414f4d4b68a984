"""What went wrong between this gateway and its upstream, in one sentence naming both ends."""

from __future__ import annotations

import json
import socket
import ssl

from tornado import web
from tornado.httpclient import HTTPClientError

from loomgate.gateway.errors import NotFound, Refusal, Unavailable

# Statuses that, with no reason of the upstream's own (just "Forbidden"), mean its auth refused us;
# with a reason (a kernel limit, a user not allowed) that reason is what is reported.
TOKEN_REFUSED_STATUSES = (401, 403)


def cause_of(error: BaseException) -> BaseException:
    """Return the innermost error behind `error` (jupyter_server wraps the real one)."""
    while error.__cause__ is not None and error.__cause__ is not error:
        error = error.__cause__
    return error


def upstream_message(error: HTTPClientError) -> str:
    """Return the reason the upstream gave in its error body, or the HTTP reason."""
    body = error.response.body if error.response is not None else b""
    try:
        payload = json.loads(body)
    except ValueError:
        return error.message or ""
    if isinstance(payload, dict):
        return str(payload.get("message") or payload.get("reason") or error.message or "")
    return error.message or ""


def describe(error: BaseException, url: str, token_env: str | None) -> Refusal:
    """Return the error to report for a failed request to the upstream at `url`."""
    cause = cause_of(error)
    where = f"the upstream at {url}"
    if isinstance(cause, HTTPClientError):
        if cause.code == 599:
            text = str(cause.message or cause)
            if "timeout" in text.lower():
                return Unavailable(f"{where} did not answer in time ({text})")
            return Unavailable(f"{where} could not be reached ({text})")
        reason = upstream_message(cause)
        if cause.code == 404:
            return NotFound(f"{where} has no such kernel ({reason})")
        if cause.code in TOKEN_REFUSED_STATUSES and reason in ("", "Forbidden", "Unauthorized"):
            if token_env:
                return Unavailable(f"{where} refused the token in ${token_env}")
            return Unavailable(
                f"{where} refused the request: it needs a token (--upstream-token-env VAR, "
                "or token_env in gateways.toml)"
            )
        return Unavailable(f"{where} refused: {reason or cause.message} (HTTP {cause.code})")
    if isinstance(cause, ssl.SSLError):
        hint = "; for a self-signed certificate set verify = false"
        why = getattr(cause, "verify_message", None) or getattr(cause, "reason", None) or cause
        return Unavailable(f"{where} failed the TLS handshake ({why}){hint}")
    if isinstance(cause, socket.gaierror):
        return Unavailable(f"{where} cannot be found: its host name does not resolve")
    if isinstance(cause, ConnectionRefusedError):
        return Unavailable(f"{where} refused the connection; is it running?")
    if isinstance(cause, (TimeoutError, socket.timeout)):
        return Unavailable(f"{where} did not answer in time")
    if isinstance(cause, OSError):
        return Unavailable(f"{where} could not be reached ({cause.strerror or cause})")
    if isinstance(error, web.HTTPError):
        return Unavailable(f"{where} failed: {error.log_message or error.reason}")
    return Unavailable(f"{where} failed: {cause}")
