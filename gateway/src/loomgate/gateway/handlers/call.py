"""One call to a loomgate endpoint, over HTTP or the rpc websocket: its method, path arguments,
query and JSON body, each parsed once, and the records they name."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeVar, overload

from loomgate.gateway.errors import Ambiguous, BadRequest, NotFound
from loomgate.gateway.kernels.open_to_agents import closed_refusal
from loomgate.gateway.kernels.registry import KernelRegistry
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.shared import wire
from loomgate.shared.echo import echo

MAX_WAIT = 3600.0
MAX_LINES_INLINE = 10_000
MAX_CLIENT_LABEL = 200
BODY_METHODS = frozenset({"POST", "PUT"})  # the methods whose arguments come from the body

Choice = TypeVar("Choice", bound=str)


def choice(value: object, allowed: tuple[Choice, ...], refusal: str) -> Choice:
    """Return `value` as one of `allowed`; BadRequest(`refusal`) if it is none of them."""
    for option in allowed:
        if value == option:
            return option
    raise BadRequest(refusal)


def stream_name(value: object) -> wire.StreamName:
    """Return `value` as a stream name (BadRequest naming the five if it is not one)."""
    refusal = f"unknown stream {echo(value)}; use one of {', '.join(wire.STREAMS)}"
    return choice(value, wire.STREAMS, refusal)


class OutputArgs(NamedTuple):
    """How much of an execution's `combined` stream to answer with: first and last lines."""

    head: int = 0
    tail: int = 0
    max_chars: int | None = None


NUMBERS = (str, int, float)  # what a number argument may be given as


def _int(raw: object) -> int:
    if isinstance(raw, NUMBERS):
        return int(raw)
    raise TypeError(raw)


def _float(raw: object) -> float:
    if isinstance(raw, NUMBERS):
        return float(raw)
    raise TypeError(raw)


class Call:
    """One call: the endpoint's arguments, parsed once, and the gateway's state it acts on.

    Arguments of a POST or PUT come from its JSON body, else from the query; those of a GET or
    DELETE from the query (a body there is ignored, as HTTP does). The body is parsed when first
    read, so an endpoint that takes none never refuses one.
    """

    __slots__ = (
        "_body",
        "_raw_body",
        "_value",
        "agent",
        "method",
        "path",
        "query",
        "route",
        "settings",
    )

    def __init__(
        self,
        settings: Mapping[str, Any],
        method: str,
        route: str,
        path: Mapping[str, str],
        query: Mapping[str, object],
        *,
        raw_body: bytes = b"",
        body: object = None,
        agent: bool = False,
    ) -> None:
        self.settings = settings  # the server's (tornado's) application settings
        self.method = method
        self.route = route  # the route's name, as in the table: "kernels/{ref}/executions"
        self.path = path
        self.query = query
        self._raw_body = raw_body  # over HTTP: the body's bytes
        self._value = body  # over rpc: the body's JSON value (None when there is none)
        self._body: dict[str, Any] | None = None
        self.agent = agent  # made for a model (wire.AGENT_HEADER): refused a closed kernel

    @property
    def registry(self) -> KernelRegistry:
        """Return the gateway's kernel registry."""
        registry: KernelRegistry = self.settings["loomgate_registry"]
        return registry

    @property
    def body(self) -> dict[str, Any]:
        """Return the JSON object the call carries ({} when none); BadRequest if it is not one."""
        if self._body is None:
            self._body = self._parse_body()
        return self._body

    def _parse_body(self) -> dict[str, Any]:
        data = self._value
        if self._raw_body:
            try:
                data = json.loads(self._raw_body)
            except ValueError as e:
                raise BadRequest(f"the request body is not valid JSON: {e}") from None
        elif data is None:
            return {}
        if not isinstance(data, dict):
            raise BadRequest("the request body must be a JSON object")
        return data

    def refuse_closed(self, ref: str) -> None:
        """Refuse (Forbidden) this call when a model makes it on a kernel not open to agents; a
        `ref` that names no kernel is left to the endpoint, which says so."""
        if not self.agent:
            return
        try:
            store = self.registry.resolve_store(ref)
        except (NotFound, Ambiguous):
            return
        if not store.open_to_agents:
            raise closed_refusal(store, self.registry.sandboxes.default_name())

    def refuse_unknown(self, takes: frozenset[str]) -> None:
        """Refuse (BadRequest) a body that carries a field the endpoint does not take: a
        misspelt field must not start something other than what was asked."""
        if self.method not in BODY_METHODS:
            return
        unknown = sorted(set(self.body) - takes)
        if unknown:
            fields = ", ".join(echo(name) for name in unknown)
            known = ", ".join(sorted(takes)) or "no fields"
            raise BadRequest(
                f"unknown field{'s' if len(unknown) > 1 else ''} {fields} in the request; "
                f"it takes {known}"
            )

    def arg(self, name: str) -> object:
        """Return argument `name`: from the body if the method has one and it is there, else
        from the query (None when absent)."""
        if self.method in BODY_METHODS:
            body = self.body
            if name in body:
                return body[name]
        return self.query.get(name)

    @overload
    def text_arg(self, name: str, default: str) -> str: ...

    @overload
    def text_arg(self, name: str, default: None = None) -> str | None: ...

    def text_arg(self, name: str, default: str | None = None) -> str | None:
        """Return an argument as text, or `default` when absent."""
        raw = self.arg(name)
        if raw is None:
            return default
        return raw if isinstance(raw, str) else str(raw)

    def _absent(self, raw: object) -> bool:
        return raw is None or raw == ""

    def _in_range(self, name: str, raw: object, value: float, lo: float, hi: float) -> None:
        if isinstance(raw, bool) or not lo <= value <= hi or value != value:
            raise BadRequest(f"{name} must be between {lo:g} and {hi:g}, not {echo(raw)}")

    @overload
    def int_arg(self, name: str, default: int, *, lo: float = 0, hi: float = math.inf) -> int: ...

    @overload
    def int_arg(
        self, name: str, default: None, *, lo: float = 0, hi: float = math.inf
    ) -> int | None: ...

    def int_arg(
        self, name: str, default: int | None, *, lo: float = 0, hi: float = math.inf
    ) -> int | None:
        """Return an integer argument within [lo, hi], or `default` when absent."""
        raw = self.arg(name)
        if self._absent(raw):
            return default
        try:
            value = _int(raw)
        except (TypeError, ValueError):
            raise BadRequest(f"{name} must be an integer, not {echo(raw)}") from None
        self._in_range(name, raw, value, lo, hi)
        return value

    @overload
    def float_arg(
        self, name: str, default: float, *, lo: float = 0, hi: float = math.inf
    ) -> float: ...

    @overload
    def float_arg(
        self, name: str, default: None, *, lo: float = 0, hi: float = math.inf
    ) -> float | None: ...

    def float_arg(
        self, name: str, default: float | None, *, lo: float = 0, hi: float = math.inf
    ) -> float | None:
        """Return a numeric argument within [lo, hi], or `default` when absent."""
        raw = self.arg(name)
        if self._absent(raw):
            return default
        try:
            value = _float(raw)
        except (TypeError, ValueError):
            raise BadRequest(f"{name} must be a number, not {echo(raw)}") from None
        self._in_range(name, raw, value, lo, hi)
        return value

    def bool_arg(self, name: str, default: bool) -> bool:
        """Return a boolean argument (true/false/1/0), or `default` when absent."""
        raw = self.arg(name)
        if raw is None:
            return default
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() in ("1", "true", "yes"):
            return True
        if str(raw).lower() in ("0", "false", "no"):
            return False
        raise BadRequest(f"{name} must be true or false, not {echo(raw)}")

    def client_arg(self) -> str | None:
        """Return who the call says it comes from (a conversation, the CLI), or None."""
        raw = self.arg("client")
        if raw is None or raw == "":
            return None
        if not isinstance(raw, str) or len(raw) > MAX_CLIENT_LABEL:
            raise BadRequest(f"client must be a string of at most {MAX_CLIENT_LABEL} characters")
        return raw

    def output_args(self) -> OutputArgs:
        """Return the head/tail/max_chars arguments of an execution request."""
        return OutputArgs(
            head=self.int_arg("head", 0, hi=MAX_LINES_INLINE),
            tail=self.int_arg("tail", 0, hi=MAX_LINES_INLINE),
            max_chars=self.int_arg("max_chars", None, lo=1),
        )

    def select(self, store: RecordStore, selector: str) -> ExecutionRecord:
        """Return the record `selector` names: a number, `latest`, or `current`.

        `current` is the running execution, else the latest one.
        """
        record: ExecutionRecord | None
        if selector in ("current", "latest"):
            kernel = self.registry.live.get(store.kernel_id)
            running = kernel.executions.current if kernel is not None else None
            record = running if selector == "current" and running else store.latest()
            if record is None:
                raise NotFound("this kernel has no executions yet")
            return record
        try:
            number = int(selector)
        except ValueError:
            raise BadRequest(
                f"execution must be a number, 'latest' or 'current', not {echo(selector)}"
            ) from None
        record = store.get(number)
        if record is None:
            last = store.last_number
            hint = f"executions are 1 to {last}" if last else "there are no executions yet"
            raise NotFound(f"no execution {number} on this kernel; {hint}", last=last or None)
        return record

    async def wait_for(self, record: ExecutionRecord) -> wire.Returned:
        """Long-poll `record` as the `wait`/`until_silent` arguments ask; return why it returned."""
        wait = self.float_arg("wait", 0.0, hi=MAX_WAIT)
        until_silent = self.float_arg("until_silent", None, hi=MAX_WAIT)
        if not wait:
            if record.final:
                return "final"
            return "input" if record.state == "awaiting_input" else "timeout"
        return await record.wait(wait, until_silent)
