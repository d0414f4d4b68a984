"""The `/api/loomgate/` HTTP endpoints: kernels, executions, streams, search, input, events."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web
from tornado.iostream import StreamClosedError

from loomgate.gateway.errors import BadRequest, GatewayError, NotFound
from loomgate.gateway.events import EventBus
from loomgate.gateway.kernels import LoomKernel
from loomgate.gateway.records import ExecutionRecord, RecordStore
from loomgate.gateway.registry import KernelRegistry
from loomgate.shared.line_range import LineRange, LineRangeError
from loomgate.shared.output_log import Line, LineLog, clip_line
from loomgate.shared.search import Matcher, SearchError, search_log
from loomgate.shared.wire import KIND_MASK, PART_START, STREAMS, OutputKind

PROTOCOL_VERSION = 1
CAPABILITIES = [
    "records",
    "streams",
    "search",
    "input",
    "events",
    "hold",
    "reset",
    "interrupt",
    "rich",
    "long_poll",
]
MAX_WAIT = 3600.0
MAX_LINES_INLINE = 10_000
SEARCH_TIMEOUT = 10.0
KEEPALIVE_SECONDS = 5.0

Method = TypeVar("Method", bound=Callable[..., Awaitable[None]])


def endpoint(method: Method) -> Method:
    """Wrap a handler method: token auth, kernel authorization, GatewayError → JSON refusal."""

    @functools.wraps(method)
    async def wrapper(self: LoomHandler, *args: Any, **kwargs: Any) -> None:
        try:
            await method(self, *args, **kwargs)
        except GatewayError as e:
            self.set_status(e.status)
            self.finish(json.dumps(e.to_json()))

    return web.authenticated(authorized(wrapper))  # type: ignore[return-value]


def line_json(line: Line, max_chars: int | None = None) -> dict[str, Any]:
    """Return a line's wire form: number, text (clipped), kind, part start, partial, clipped."""
    text, clipped = clip_line(line.text, max_chars)
    kind = line.tag & KIND_MASK
    out: dict[str, Any] = {"n": line.number, "text": text}
    if kind:
        out["kind"] = OutputKind(kind).name.lower()
    if line.tag & PART_START:
        out["start"] = True
    if line.partial:
        out["partial"] = True
    if clipped:
        out["clipped"] = clipped
    return out


class LoomHandler(APIHandler):
    """Base of loomgate's handlers: argument parsing and access to the registry."""

    auth_resource = "kernels"

    @property
    def registry(self) -> KernelRegistry:
        """Return the gateway's kernel registry."""
        return self.settings["loomgate_registry"]  # type: ignore[no-any-return]

    @property
    def events(self) -> EventBus:
        """Return the gateway's event bus."""
        return self.settings["loomgate_events"]  # type: ignore[no-any-return]

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
            raise BadRequest(f"{name} must be {kind}, not {raw!r}") from None
        if isinstance(raw, bool) or not lo <= value <= hi or value != value:
            raise BadRequest(f"{name} must be between {lo:g} and {hi:g}, not {raw!r}")
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
        raise BadRequest(f"{name} must be true or false, not {raw!r}")

    def select(self, store: RecordStore, selector: str) -> ExecutionRecord:
        """Return the record `selector` names: a number, `latest`, or `current`.

        `current` is the running execution, else the latest one.
        """
        record: ExecutionRecord | None
        if selector in ("current", "latest"):
            kernel = self.registry.live.get(store.kernel_id)
            running = kernel.current if kernel is not None else None
            record = running if selector == "current" and running else store.latest()
            if record is None:
                raise NotFound("this kernel has no executions yet")
            return record
        try:
            number = int(selector)
        except ValueError:
            raise BadRequest(
                f"execution must be a number, 'latest' or 'current', not {selector!r}"
            ) from None
        record = store.get(number)
        if record is None:
            last = store.last_number
            hint = f"executions are 1 to {last}" if last else "there are no executions yet"
            raise NotFound(f"no execution {number} on this kernel; {hint}", last=last or None)
        return record

    def execution_json(
        self, record: ExecutionRecord, *, head: int = 0, tail: int = 0, max_chars: int | None = None
    ) -> dict[str, Any]:
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
            data["output"] = {
                "total": total,
                "head": [line_json(line, max_chars) for line in first],
                "tail": [line_json(line, max_chars) for line in last],
                "omitted": omitted,
            }
        return data

    def output_args(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """Return the head/tail/max_chars arguments of an execution request."""
        return {
            "head": self.number_arg("head", 0, hi=MAX_LINES_INLINE, body=body, integer=True),
            "tail": self.number_arg("tail", 0, hi=MAX_LINES_INLINE, body=body, integer=True),
            "max_chars": self.number_arg("max_chars", None, lo=1, body=body, integer=True),
        }

    async def wait_for(self, record: ExecutionRecord, body: dict[str, Any] | None = None) -> str:
        """Long-poll `record` as the `wait`/`until_silent` arguments ask; return why it returned."""
        wait = self.number_arg("wait", 0.0, hi=MAX_WAIT, body=body)
        until_silent = self.number_arg("until_silent", None, hi=MAX_WAIT, body=body)
        if not wait:
            if record.final:
                return "final"
            return "input" if record.state == "awaiting_input" else "timeout"
        return await record.wait(wait, until_silent)


class InfoHandler(LoomHandler):
    """GET /api/loomgate/info: who this is, so a translator can tell it from a stock server."""

    @endpoint
    async def get(self) -> None:
        """Return service name, versions, capabilities and kernel specs."""
        from loomgate.gateway import __version__

        specs = self.registry.mkm.kernel_spec_manager.find_kernel_specs()
        self.finish(
            {
                "service": "loomgate",
                "version": __version__,
                "protocol": PROTOCOL_VERSION,
                "capabilities": CAPABILITIES,
                "pid": os.getpid(),
                "started": self.settings["loomgate_started"],
                "kernel_specs": sorted(specs),
                "default_kernel_spec": self.registry.mkm.default_kernel_name,
                "conversation_grace_seconds": self.registry.grace_seconds,
            }
        )


class KernelsHandler(LoomHandler):
    """GET/POST /api/loomgate/kernels: list kernels; create or get one by name."""

    @endpoint
    async def get(self) -> None:
        """Return live kernels (and, with all=true, gone kernels whose records remain)."""
        kernels = [k.model() for k in self.registry.live.values()]
        if self.bool_arg("all", False):
            live = self.registry.live
            kernels += [
                gone_model(s) for s in self.registry.stores.values() if s.kernel_id not in live
            ]
        self.finish({"kernels": kernels})

    @endpoint
    async def post(self) -> None:
        """Create a kernel, or return the live one with the requested name (200 vs 201)."""
        body = self.body()
        name = body.get("name")
        env = body.get("env")
        for key, value, kind in (
            ("name", name, str),
            ("kernel_spec", body.get("kernel_spec"), str),
            ("cwd", body.get("cwd"), str),
            ("env", env, dict),
        ):
            if value is not None and not isinstance(value, kind):
                raise BadRequest(f"{key} must be a {kind.__name__}")
        kernel, created = await self.registry.create(
            name=name,
            kernel_spec=body.get("kernel_spec"),
            lifetime=str(body.get("lifetime", "persistent")),
            cwd=body.get("cwd"),
            env=env,
        )
        self.set_status(201 if created else 200)
        self.finish({"kernel": kernel.model(), "created": created})


def gone_model(store: RecordStore) -> dict[str, Any]:
    """Return the wire form of a kernel that is no longer running."""
    meta = store.meta
    latest = store.latest()
    return {
        "id": store.kernel_id,
        "name": meta.get("name"),
        "kernel_spec": meta.get("kernel_spec"),
        "lifetime": meta.get("lifetime"),
        "state": "gone",
        "alive": False,
        "current_execution": None,
        "executions": len(store.all()),
        "last_execution": latest.number if latest else None,
        "last_activity": meta.get("ended"),
        "connections": 0,
        "holders": 0,
        "cwd": meta.get("cwd"),
        "created": meta.get("created"),
        "ended": meta.get("ended"),
        "implementation": meta.get("implementation", ""),
    }


class KernelHandler(LoomHandler):
    """GET/DELETE /api/loomgate/kernels/{ref}: one kernel's model; stop it."""

    @endpoint
    async def get(self, ref: str) -> None:
        """Return the kernel's model (live or gone)."""
        store = self.registry.resolve_store(ref)
        kernel = self.registry.live.get(store.kernel_id)
        self.finish({"kernel": kernel.model() if kernel else gone_model(store)})

    @endpoint
    async def delete(self, ref: str) -> None:
        """Stop the kernel; its records stay readable."""
        kernel = self.registry.resolve(ref)
        await self.registry.stop(kernel)
        self.finish({"kernel": gone_model(kernel.store)})


class InterruptHandler(LoomHandler):
    """POST /api/loomgate/kernels/{ref}/interrupt."""

    @endpoint
    async def post(self, ref: str) -> None:
        """Interrupt the running execution; 409 when nothing runs."""
        kernel = self.registry.resolve(ref)
        record = await kernel.interrupt()
        self.finish({"execution": record.summary()})


class ResetHandler(LoomHandler):
    """POST /api/loomgate/kernels/{ref}/reset."""

    @endpoint
    async def post(self, ref: str) -> None:
        """Restart the kernel process; a running record becomes `killed`, numbering continues."""
        kernel = self.registry.resolve(ref)
        running = kernel.current
        await self.registry.reset(kernel)
        killed = running.summary() if running is not None else None
        self.finish({"kernel": kernel.model(), "killed": killed})


class ExecutionsHandler(LoomHandler):
    """GET/POST /api/loomgate/kernels/{ref}/executions: list; submit a cell."""

    @endpoint
    async def get(self, ref: str) -> None:
        """Return summaries of executions after `since` (at most `limit`, newest last)."""
        store = self.registry.resolve_store(ref)
        since = self.number_arg("since", 0, integer=True)
        limit = self.number_arg("limit", 100, lo=1, hi=10_000, integer=True)
        records = [r for r in store.all() if r.number > since][-limit:]
        self.finish({"executions": [r.summary() for r in records]})

    @endpoint
    async def post(self, ref: str) -> None:
        """Submit `code`; 201 with the record (after an optional wait), 409 when busy."""
        body = self.body()
        code = body.get("code")
        if not isinstance(code, str):
            raise BadRequest("code (a string) is required")
        kernel = self.registry.resolve(ref)
        output = self.output_args(body)
        record = await kernel.submit(code)
        reason = await self.wait_for(record, body)
        self.set_status(201)
        self.finish({"execution": self.execution_json(record, **output), "returned": reason})


class ExecutionHandler(LoomHandler):
    """GET /api/loomgate/kernels/{ref}/executions/{sel}: status, with an optional long-poll."""

    @endpoint
    async def get(self, ref: str, selector: str) -> None:
        """Return the record, after waiting as `wait`/`until_silent` ask."""
        store = self.registry.resolve_store(ref)
        record = self.select(store, selector)
        output = self.output_args()
        reason = await self.wait_for(record)
        self.finish({"execution": self.execution_json(record, **output), "returned": reason})


class StreamHandler(LoomHandler):
    """GET …/executions/{sel}/streams/{stream}?lines=a:b&max_chars=N: read lines."""

    @endpoint
    async def get(self, ref: str, selector: str, stream: str) -> None:
        """Return the lines of `stream` in the range, with the stream's total line count."""
        if stream not in STREAMS:
            raise BadRequest(f"unknown stream {stream!r}; use one of {', '.join(STREAMS)}")
        record = self.select(self.registry.resolve_store(ref), selector)
        try:
            line_range = LineRange.parse(self.get_query_argument("lines", None))
        except LineRangeError as e:
            raise BadRequest(str(e)) from None
        max_chars = self.number_arg("max_chars", None, lo=1, integer=True)
        log = record.log(stream)
        total = log.total
        lo, hi = line_range.resolve(total)
        if hi - lo > MAX_LINES_INLINE:
            hi = lo + MAX_LINES_INLINE
        lines = log.read(lo, hi)
        self.finish(
            {
                "number": record.number,
                "state": record.state,
                "stream": stream,
                "total": total,
                "range": str(line_range),
                "first": lo + 1,
                "last": hi,
                "truncated": hi < line_range.resolve(total)[1],
                "lines": [line_json(line, max_chars) for line in lines],
            }
        )


class RichHandler(LoomHandler):
    """GET …/executions/{sel}/rich/{index}: one rich output's MIME bundle."""

    @endpoint
    async def get(self, ref: str, selector: str, index: str) -> None:
        """Return the bundle ({data, metadata}) and where it sits in `combined`."""
        record = self.select(self.registry.resolve_store(ref), selector)
        try:
            bundle = record.rich_bundle(int(index))
        except (KeyError, ValueError):
            raise NotFound(
                f"execution {record.number} has no rich output {index}; it has {len(record.rich)}"
            ) from None
        self.finish({"number": record.number, **record.rich[int(index)], **bundle})


class InputHandler(LoomHandler):
    """POST …/executions/{sel}/input {value}: answer a pending input()."""

    @endpoint
    async def post(self, ref: str, selector: str) -> None:
        """Send the value to the kernel; 409 when that execution is not waiting for input."""
        body = self.body()
        value = body.get("value")
        if not isinstance(value, str):
            raise BadRequest("value (a string) is required")
        kernel = self.registry.resolve(ref)
        record = self.select(kernel.store, selector)
        kernel.answer_input(record, value)
        self.finish({"execution": record.summary()})


class SearchHandler(LoomHandler):
    """GET /api/loomgate/kernels/{ref}/search: find lines in one execution or all of them."""

    @endpoint
    async def get(self, ref: str) -> None:
        """Return matching lines grouped with their context, per execution."""
        store = self.registry.resolve_store(ref)
        query = self.get_query_argument("query", None)
        if not query:
            raise BadRequest("query is required")
        stream = self.get_query_argument("stream", "combined")
        if stream not in STREAMS:
            raise BadRequest(f"unknown stream {stream!r}; use one of {', '.join(STREAMS)}")
        mode = self.get_query_argument("mode", "auto")
        if mode not in ("auto", "literal", "regex"):
            raise BadRequest(f"mode must be auto, literal or regex, not {mode!r}")
        context = self.number_arg("context", 0, hi=1000, integer=True)
        max_matches = self.number_arg("max_matches", 50, lo=1, hi=10_000, integer=True)
        selector = self.get_query_argument("execution", "current")
        records = store.all() if selector == "all" else [self.select(store, selector)]
        try:
            matcher = Matcher.build(query, mode, self.bool_arg("ignore_case", False))  # type: ignore[arg-type]
        except SearchError as e:
            raise BadRequest(str(e)) from None
        for record in records:
            record.flush()
        logs = [(r.number, r.log(stream)) for r in records]
        try:
            result = await asyncio.to_thread(search_all, logs, matcher, context, max_matches)
        except SearchError as e:
            raise BadRequest(str(e)) from None
        self.finish({"query": query, "mode": matcher.mode, "stream": stream, **result})


def search_all(
    logs: list[tuple[int, LineLog]], matcher: Matcher, context: int, max_matches: int
) -> dict[str, Any]:
    """Return matches across `logs` in order, at most `max_matches` in all."""
    deadline = time.monotonic() + SEARCH_TIMEOUT
    groups: list[dict[str, Any]] = []
    matches = searched = 0
    truncated = False
    for number, log in logs:
        if matches >= max_matches:
            truncated = True
            break
        searched += 1
        result = search_log(
            log, matcher, context=context, max_matches=max_matches - matches, deadline=deadline
        )
        matches += result.matches
        truncated = truncated or result.truncated
        for group in result.groups:
            groups.append(
                {
                    "execution": number,
                    "lines": [{"n": h.number, "text": h.text, "marker": h.marker} for h in group],
                }
            )
    return {"matches": matches, "truncated": truncated, "groups": groups, "searched": searched}


class EventsHandler(LoomHandler):
    """GET /api/loomgate/events[?kernel=ref&hold=true]: server-sent events.

    With `hold=true` the open connection holds the kernel: a conversation kernel starts its grace
    period only when its last holder's connection closes (a crashed translator included).
    """

    _closed: asyncio.Event

    @endpoint
    async def get(self) -> None:
        """Stream events until the client goes away."""
        ref = self.get_query_argument("kernel", None)
        kernel: LoomKernel | None = self.registry.resolve(ref) if ref else None
        hold = self.bool_arg("hold", False)
        if hold and kernel is None:
            raise BadRequest("hold=true needs a kernel")
        self._closed = asyncio.Event()
        self.request.connection.stream.set_nodelay(True)  # type: ignore[attr-defined]
        self.set_header("Content-Type", "text/event-stream")
        self.set_header("Cache-Control", "no-cache")
        self.set_header("X-Accel-Buffering", "no")
        subscription = self.events.subscribe(kernel.id if kernel else None)
        if hold and kernel is not None:
            self.registry.hold(kernel)
        try:
            hello = {"event": "hello", "kernel": kernel.model() if kernel else None}
            await self._send("hello", hello)
            while not self._closed.is_set():
                getter = asyncio.ensure_future(subscription.queue.get())
                closed = asyncio.ensure_future(self._closed.wait())
                done, _ = await asyncio.wait(
                    {getter, closed}, timeout=KEEPALIVE_SECONDS, return_when="FIRST_COMPLETED"
                )
                for future in (getter, closed):
                    if future not in done:
                        future.cancel()
                if getter in done:
                    message = getter.result()
                    await self._send(message["event"], message)
                elif not done:
                    self.write(": keepalive\n\n")
                    await self.flush()
        except StreamClosedError:
            pass
        finally:
            self.events.unsubscribe(subscription)
            if hold and kernel is not None:
                self.registry.release(kernel)
            with contextlib.suppress(Exception):
                self.finish()

    async def _send(self, event: str, data: dict[str, Any]) -> None:
        self.write(f"event: {event}\ndata: {json.dumps(data)}\n\n")
        await self.flush()

    def on_connection_close(self) -> None:
        """Wake the stream loop so it releases its hold at once."""
        self._closed.set()


def handlers(base: str = "/api/loomgate") -> list[tuple[str, type[LoomHandler]]]:
    """Return the URL routes of loomgate's endpoints."""
    kernel = base + r"/kernels/(?P<ref>[^/]+)"
    execution = kernel + r"/executions/(?P<selector>[^/]+)"
    return [
        (base + r"/info", InfoHandler),
        (base + r"/kernels", KernelsHandler),
        (kernel, KernelHandler),
        (kernel + r"/interrupt", InterruptHandler),
        (kernel + r"/reset", ResetHandler),
        (kernel + r"/executions", ExecutionsHandler),
        (execution, ExecutionHandler),
        (execution + r"/streams/(?P<stream>[^/]+)", StreamHandler),
        (execution + r"/rich/(?P<index>[^/]+)", RichHandler),
        (execution + r"/input", InputHandler),
        (kernel + r"/search", SearchHandler),
        (base + r"/events", EventsHandler),
    ]
