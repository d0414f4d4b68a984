"""The gateway's refusals: each one an HTTP status, a stable code and one clear sentence."""

from __future__ import annotations

from typing import Any

from loomgate.shared import wire


class Refusal(Exception):
    """A request the gateway refuses; `code` is stable, `message` is for people and models."""

    status = 400
    code: wire.ErrorCode = "bad_request"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_json(self) -> dict[str, Any]:
        """Return the wire form (a wire.Refusal): {"error": code, "message": …, **details}."""
        return {"error": self.code, "message": self.message, **self.details}


class BadRequest(Refusal):
    """Malformed input: a bad range, regex, name, cwd or argument."""


class NotFound(Refusal):
    """An unknown kernel, execution, stream or rich output."""

    status = 404
    code = "not_found"


class Ambiguous(Refusal):
    """A kernel reference that matches more than one kernel."""

    code = "ambiguous"


class Busy(Refusal):
    """The kernel is running an execution; submissions are refused, never queued."""

    status = 409
    code = "busy"


class Conflict(Refusal):
    """The request does not fit the current state (nothing to interrupt, no input pending)."""

    status = 409
    code = "conflict"


class Forbidden(Refusal):
    """A model's request to run less confined than the person decided."""

    status = 403
    code = "forbidden"


class Unavailable(Refusal):
    """The kernel is starting, restarting, dead or did not answer in time."""

    status = 503
    code = "unavailable"


class StoppedWhileStarting(Unavailable):
    """A stop asked for a kernel whose process had not yet answered its start."""

    def __init__(self) -> None:
        super().__init__("the kernel was stopped while it was starting")


class StorageFailed(Refusal):
    """The disk refuses the writes a record needs (full, read-only, no permission)."""

    status = 507
    code = "storage_failed"
