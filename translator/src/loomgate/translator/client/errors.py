"""What can go wrong reaching a gateway: one exception class per kind, each with one sentence.

    GatewayError                 the base: `code`, `message`, `status`, `details`
    ├── Refused                  the gateway answered with a refusal (wire.Refusal)
    │   ├── BadRequest           bad_request: malformed input
    │   ├── Ambiguous            ambiguous: a reference naming several kernels
    │   ├── NotFound             not_found: no such kernel, execution, stream, rich output
    │   ├── Busy                 busy: the kernel runs an execution
    │   ├── Conflict             conflict: the request does not fit the state
    │   ├── Unavailable          unavailable: the kernel is starting, dead or did not answer
    │   ├── StorageFailed        storage_failed: the disk refuses a record's writes
    │   └── Internal             internal: a fault of the gateway's own
    └── the translator's own failures, with no refusal to read:
        ├── Unreachable          no gateway answered (`details["refused"]`: it never arrived)
        ├── Timeout              no answer in time
        ├── AuthFailed           the token is missing or refused
        ├── ProtocolError        the answer is not a loomgate gateway's
        │   └── NoExtension      a Jupyter server without loomgate's extension
        └── StreamBroken         the event stream broke mid-body

Catch the class (`except Busy:`), never compare `code`; `code` stays readable for messages and
logs. A refusal whose code this translator does not know (a newer gateway) is a plain Refused
with that code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class GatewayError(Exception):
    """A gateway refusal or failure: a stable `code` and one sentence for a model or a person."""

    code: str = "error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        """Return the one-sentence message."""
        return self.message

    def __repr__(self) -> str:
        """Return the class, code and message, for debugging."""
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, status={self.status!r})"


class Refused(GatewayError):
    """The gateway refused the request; `details` holds the refusal's other fields."""

    code = "refused"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message, status=status, details=details)
        if code is not None:
            self.code = code


class BadRequest(Refused):
    """Malformed input: a range, a regex, a name, an argument."""

    code = "bad_request"


class Ambiguous(Refused):
    """A kernel reference that matches more than one kernel."""

    code = "ambiguous"


class NotFound(Refused):
    """An unknown kernel, execution, stream or rich output."""

    code = "not_found"


class Busy(Refused):
    """The kernel runs an execution (`details`: the one running, or its setup)."""

    code = "busy"


class Conflict(Refused):
    """The request does not fit the state (nothing to interrupt, no input pending, …)."""

    code = "conflict"


class Uninspected(Conflict):
    """A kernel refused the person's setup: it cannot run inspectors.py, which
    LOOMGATE_UNINSPECTED=refuse makes a condition of every kernel (`details["stopped"]`: the
    translator stopped the kernel it had just started for the request)."""


class Forbidden(Refused):
    """A model's request to run less confined than the person decided (a looser sandbox)."""

    code = "forbidden"


class Unavailable(Refused):
    """The kernel is starting, restarting, dead or did not answer (`details["kernel_id"]` when
    it is gone)."""

    code = "unavailable"


class StorageFailed(Refused):
    """The gateway's disk refuses the writes a record needs."""

    code = "storage_failed"


class Internal(Refused):
    """A fault of the gateway's own."""

    code = "internal"


REFUSALS: dict[str, type[Refused]] = {
    cls.code: cls
    for cls in (
        BadRequest,
        Ambiguous,
        NotFound,
        Busy,
        Conflict,
        Forbidden,
        Unavailable,
        StorageFailed,
        Internal,
    )
}


def refusal(answer: Mapping[str, object], status: int) -> Refused:
    """Return the exception of a refusal answer (`error`, `message`, and its details)."""
    code = str(answer["error"])
    details = {k: v for k, v in answer.items() if k not in ("error", "message")}
    cls = REFUSALS.get(code)
    if cls is None:
        return Refused(str(answer["message"]), status=status, details=details, code=code)
    return cls(str(answer["message"]), status=status, details=details)


class Unreachable(GatewayError):
    """No gateway answered. `details["refused"]` is true when the connection was refused, so
    the request never arrived and may be sent again."""

    code = "unreachable"

    @property
    def refused(self) -> bool:
        """Return whether the request certainly never reached a gateway."""
        return bool(self.details.get("refused"))


class Timeout(GatewayError):
    """No answer within the time allowed (the request may have arrived)."""

    code = "timeout"


class AuthFailed(GatewayError):
    """There is no token for the gateway, or the gateway refused it."""

    code = "auth"


class ProtocolError(GatewayError):
    """What answered is not a loomgate gateway, or answered something it never sends."""

    code = "protocol"


class NoExtension(ProtocolError):
    """A Jupyter server that answers but has no loomgate extension."""


class StreamBroken(GatewayError):
    """The event stream's body broke (a bad chunk, say)."""

    code = "stream"


class GatewayConfigError(ValueError):
    """A selection that cannot work: a bad gateways.toml, an unknown name, a missing token."""
