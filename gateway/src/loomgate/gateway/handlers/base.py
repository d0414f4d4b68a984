"""The base of loomgate's HTTP endpoints: auth, argument parsing, record selection, lines."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from loomgate.gateway.errors import BadRequest, NotFound, Refusal
from loomgate.gateway.events import EventBus
from loomgate.gateway.kernels.notebooks import note_paths
from loomgate.gateway.kernels.registry import KernelRegistry
from loomgate.gateway.records.output_log import KIND_MASK, PART_START, Line, OutputKind, clip_line
from loomgate.gateway.records.record import ExecutionRecord
from loomgate.gateway.records.store import RecordStore
from loomgate.shared import wire
from loomgate.shared.echo import echo

MAX_WAIT = 3600.0
MAX_LINES_INLINE = 10_000
MAX_CLIENT_LABEL = 200

Method = TypeVar("Method", bound=Callable[..., Awaitable[None]])


def endpoint(method: Method) -> Method:
    """Wrap a handler method: token auth, kernel authorization, Refusal → JSON refusal."""

    @functools.wraps(method)
    async def wrapper(self: LoomHandler, *args: Any, **kwargs: Any) -> None:
        try:
            await self.registry.ready.wait()  # kernels left running are being taken back
            await method(self, *args, **kwargs)
        except Refusal as e:
            self.reply(e.to_json(), e.status)

    return web.authenticated(authorized(wrapper))  # type: ignore[return-value]


Choice = TypeVar("Choice", bound=str)


def choice(value: str | None, allowed: tuple[Choice, ...], refusal: str) -> Choice:
    """Return `value` as one of `allowed`; BadRequest(`refusal`) if it is none of them."""
    for option in allowed:
        if value == option:
            return option
    raise BadRequest(refusal)


def stream_name(value: str | None) -> wire.StreamName:
    """Return `value` as a stream name (BadRequest naming the five if it is not one)."""
    refusal = f"unknown stream {echo(value)}; use one of {', '.join(wire.STREAMS)}"
    return choice(value, wire.STREAMS, refusal)


LINE_KINDS: dict[int, wire.LineKind] = {
    OutputKind.STDOUT: "stdout",
    OutputKind.STDERR: "stderr",
    OutputKind.RESULT: "result",
    OutputKind.DISPLAY: "display",
    OutputKind.ERROR: "error",
    OutputKind.RICH: "rich",
}


def line_json(line: Line, max_chars: int | None = None) -> wire.Line:
    """Return a line's wire form: number, text (clipped), kind, part start, partial, clipped."""
    text, clipped = clip_line(line.text, max_chars)
    kind = line.tag & KIND_MASK
    out = wire.Line(n=line.number, text=text)
    if kind:
        out["kind"] = LINE_KINDS[kind]
    if line.tag & PART_START:
        out["start"] = True
    if line.partial:
        out["partial"] = True
    if clipped:
        out["clipped"] = clipped
    return out


class LoomCall:
    """One call to loomgate, over HTTP or the channel: its arguments parsed, the records it
    names. A subclass says where arguments come from (`arg`) and whose registry it is."""

    @property
    def registry(self) -> KernelRegistry:
        """Return the gateway's kernel registry."""
        raise NotImplementedError

    def arg(self, name: str, body: dict[str, Any] | None = None) -> Any:
        """Return argument `name` (None when absent)."""
        raise NotImplementedError

    def number_arg(
        self,
        name: str,
        default: float | None,
        *,
        lo: float = 0,
        hi: float = math.inf,
        body: dict[str, Any] | None = None,
        integer: bool = False,
    ) -> Any:
        """Return a numeric argument within [lo, hi], or `default` when absent."""
        raw = self.arg(name, body)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw) if integer else float(raw)
        except (TypeError, ValueError):
            kind = "an integer" if integer else "a number"
            raise BadRequest(f"{name} must be {kind}, not {echo(raw)}") from None
        if isinstance(raw, bool) or not lo <= value <= hi or value != value:
            raise BadRequest(f"{name} must be between {lo:g} and {hi:g}, not {echo(raw)}")
        return value

    def bool_arg(self, name: str, default: bool, body: dict[str, Any] | None = None) -> bool:
        """Return a boolean argument (true/false/1/0), or `default` when absent."""
        raw = self.arg(name, body)
        if raw is None:
            return default
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() in ("1", "true", "yes"):
            return True
        if str(raw).lower() in ("0", "false", "no"):
            return False
        raise BadRequest(f"{name} must be true or false, not {echo(raw)}")

    def client_arg(self, body: dict[str, Any] | None = None) -> str | None:
        """Return who the request says it comes from (a conversation, the CLI), or None."""
        raw = self.arg("client", body)
        if raw is None or raw == "":
            return None
        if not isinstance(raw, str) or len(raw) > MAX_CLIENT_LABEL:
            raise BadRequest(f"client must be a string of at most {MAX_CLIENT_LABEL} characters")
        return raw

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

    def execution_json(
        self, record: ExecutionRecord, *, head: int = 0, tail: int = 0, max_chars: int | None = None
    ) -> wire.Execution:
        """Return a record's summary, plus the first `head` and last `tail` combined lines."""
        data = record.summary()
        if head or tail:
            log = record.log("combined")
            total = log.total
            if head + tail >= total:
                lines, omitted = log.read(0, total), 0
                first, last = lines, []
            else:
                first, last = log.read(0, head), log.read(total - tail, total)
                omitted = total - head - tail
            data["output"] = wire.OutputView(
                total=total,
                head=[line_json(line, max_chars) for line in first],
                tail=[line_json(line, max_chars) for line in last],
                omitted=omitted,
            )
        return data

    def output_args(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Return the head/tail/max_chars arguments of an execution request."""
        return {
            "head": self.number_arg("head", 0, hi=MAX_LINES_INLINE, body=body, integer=True),
            "tail": self.number_arg("tail", 0, hi=MAX_LINES_INLINE, body=body, integer=True),
            "max_chars": self.number_arg("max_chars", None, lo=1, body=body, integer=True),
        }

    async def wait_for(
        self, record: ExecutionRecord, body: dict[str, Any] | None = None
    ) -> wire.Returned:
        """Long-poll `record` as the `wait`/`until_silent` arguments ask; return why it returned."""
        wait = self.number_arg("wait", 0.0, hi=MAX_WAIT, body=body)
        until_silent = self.number_arg("until_silent", None, hi=MAX_WAIT, body=body)
        if not wait:
            if record.final:
                return "final"
            return "input" if record.state == "awaiting_input" else "timeout"
        return await record.wait(wait, until_silent)


class LoomHandler(LoomCall, APIHandler):
    """Base of loomgate's HTTP handlers: arguments from the body or query, JSON replies."""

    auth_resource = "kernels"
    monitor_readable = False  # whether the monitor credential may GET it (monitor/access.py)

    @property
    def registry(self) -> KernelRegistry:
        """Return the gateway's kernel registry."""
        return self.settings["loomgate_registry"]  # type: ignore[no-any-return]

    @property
    def events(self) -> EventBus:
        """Return the gateway's event bus."""
        return self.settings["loomgate_events"]  # type: ignore[no-any-return]

    async def note_sessions(self) -> None:
        """Bring each live kernel's notebook and console paths up to date from the server's
        sessions (what JupyterLab opened), for kernel models and references by path."""
        sessions = await self.settings["session_manager"].list_sessions()
        paths: dict[str, list[str]] = {}
        for session in sessions:
            kernel = session.get("kernel") or {}
            if kernel.get("id") and session.get("path"):
                paths.setdefault(kernel["id"], []).append(str(session["path"]))
        note_paths(self.registry.stores, self.registry.live, paths)

    def reply(self, data: Mapping[str, object], status: int = 200) -> None:
        """Finish the request with `data` as its JSON body."""
        self.set_status(status)
        self.finish(json.dumps(data))

    def body(self) -> dict[str, Any]:
        """Return the JSON object in the request body ({} when empty)."""
        if not self.request.body:
            return {}
        try:
            data = json.loads(self.request.body)
        except ValueError as e:
            raise BadRequest(f"the request body is not valid JSON: {e}") from None
        if not isinstance(data, dict):
            raise BadRequest("the request body must be a JSON object")
        return data

    def arg(self, name: str, body: dict[str, Any] | None = None) -> Any:
        """Return argument `name` from the JSON body if given, else from the query string."""
        if body is not None and name in body:
            return body[name]
        return self.get_query_argument(name, None)
