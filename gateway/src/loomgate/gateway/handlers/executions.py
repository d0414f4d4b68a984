"""Endpoints for executions: submit, long-poll, stream reads, rich outputs, input, search."""

from __future__ import annotations

import asyncio
from typing import Any

from loomgate.gateway.errors import BadRequest, NotFound
from loomgate.gateway.handlers.base import (
    MAX_LINES_INLINE,
    LoomCall,
    LoomHandler,
    choice,
    endpoint,
    line_json,
    stream_name,
)
from loomgate.gateway.records.line_range import LineRange, LineRangeError
from loomgate.gateway.records.search import Matcher, SearchError, search_records
from loomgate.shared import wire
from loomgate.shared.echo import echo
from loomgate.shared.wire import SEARCH_MODES

SEARCH_TIMEOUT = 10.0


async def submitted(call: LoomCall, ref: str, body: dict[str, Any]) -> wire.ExecutionReply:
    """Return the reply to a submitted cell: its record, after the wait the call asks for."""
    code = body.get("code")
    if not isinstance(code, str):
        raise BadRequest("code (a string) is required")
    kernel = call.registry.resolve(ref)
    output = call.output_args(body)
    record = await kernel.executions.submit(code, call.client_arg(body))
    reason = await call.wait_for(record, body)
    return wire.ExecutionReply(execution=call.execution_json(record, **output), returned=reason)


async def followed(call: LoomCall, ref: str, selector: str) -> wire.ExecutionReply:
    """Return an execution's record, after the long-poll the call asks for."""
    store = call.registry.resolve_store(ref)
    record = call.select(store, selector)
    output = call.output_args()
    reason = await call.wait_for(record)
    return wire.ExecutionReply(execution=call.execution_json(record, **output), returned=reason)


class ExecutionsHandler(LoomHandler):
    """GET/POST /api/loomgate/kernels/{ref}/executions: list; submit a cell."""

    monitor_readable = True

    @endpoint
    async def get(self, ref: str) -> None:
        """Return summaries of executions after `since` and before `before` (at most `limit`,
        newest last), each with its first `head` and last `tail` lines when asked."""
        store = self.registry.resolve_store(ref)
        since = self.number_arg("since", 0, integer=True)
        before = self.number_arg("before", None, integer=True)
        limit = self.number_arg("limit", 100, lo=1, hi=10_000, integer=True)
        output = self.output_args()
        records = [
            r for r in store.all() if r.number > since and (before is None or r.number < before)
        ][-limit:]
        executions = [self.execution_json(r, **output) for r in records]
        self.reply(wire.ExecutionList(executions=executions))

    @endpoint
    async def post(self, ref: str) -> None:
        """Submit `code`; 201 with the record (after an optional wait), 409 when busy."""
        self.reply(await submitted(self, ref, self.body()), 201)


class ExecutionHandler(LoomHandler):
    """GET /api/loomgate/kernels/{ref}/executions/{sel}: status, with an optional long-poll."""

    monitor_readable = True

    @endpoint
    async def get(self, ref: str, selector: str) -> None:
        """Return the record, after waiting as `wait`/`until_silent` ask."""
        self.reply(await followed(self, ref, selector))


class StreamHandler(LoomHandler):
    """GET …/executions/{sel}/streams/{stream}?lines=a:b&max_chars=N: read lines."""

    monitor_readable = True

    @endpoint
    async def get(self, ref: str, selector: str, stream: str) -> None:
        """Return the lines of `stream` in the range, with the stream's total line count."""
        name = stream_name(stream)
        record = self.select(self.registry.resolve_store(ref), selector)
        try:
            line_range = LineRange.parse(self.get_query_argument("lines", None))
        except LineRangeError as e:
            raise BadRequest(str(e)) from None
        max_chars = self.number_arg("max_chars", None, lo=1, integer=True)
        log = record.log(name)
        total = log.total
        lo, hi = line_range.resolve(total)
        if hi - lo > MAX_LINES_INLINE:
            hi = lo + MAX_LINES_INLINE
        lines = log.read(lo, hi)
        self.reply(
            wire.StreamRead(
                number=record.number,
                state=record.state,
                stream=name,
                total=total,
                range=str(line_range),
                first=lo + 1,
                last=hi,
                truncated=hi < line_range.resolve(total)[1],
                lines=[line_json(line, max_chars) for line in lines],
            )
        )


class RichHandler(LoomHandler):
    """GET …/executions/{sel}/rich/{index}: one rich output's MIME bundle."""

    monitor_readable = True

    @endpoint
    async def get(self, ref: str, selector: str, index: str) -> None:
        """Return the bundle ({data, metadata}) and where it sits in `combined`."""
        record = self.select(self.registry.resolve_store(ref), selector)
        try:
            bundle = record.rich.bundle(int(index))
        except (KeyError, ValueError):
            count = len(record.rich.entries)
            raise NotFound(
                f"execution {record.number} has no rich output {index}; it has {count}"
            ) from None
        entry = record.rich.entries[int(index)]
        self.reply(
            wire.RichBundle(
                number=record.number, **entry, data=bundle["data"], metadata=bundle["metadata"]
            )
        )


class TracebackHandler(LoomHandler):
    """GET …/executions/{sel}/traceback: the traceback with the kernel's ANSI colours."""

    monitor_readable = True

    @endpoint
    async def get(self, ref: str, selector: str) -> None:
        """Return the coloured traceback (404 when the execution raised nothing)."""
        record = self.select(self.registry.resolve_store(ref), selector)
        text = record.coloured_traceback()
        if text is None:
            raise NotFound(f"execution {record.number} raised no error")
        self.reply(wire.ColouredTraceback(number=record.number, text=text))


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
        kernel.executions.answer_input(record, value)
        self.reply(wire.ExecutionOnly(execution=record.summary()))


class SearchHandler(LoomHandler):
    """GET /api/loomgate/kernels/{ref}/search: find lines in one execution or all of them."""

    monitor_readable = True

    @endpoint
    async def get(self, ref: str) -> None:
        """Return matching lines grouped with their context, per execution."""
        store = self.registry.resolve_store(ref)
        query = self.get_query_argument("query", None)
        if not query:
            raise BadRequest("query is required")
        stream = stream_name(self.get_query_argument("stream", "combined"))
        raw_mode = self.get_query_argument("mode", "auto")
        refusal = f"mode must be auto, literal or regex, not {echo(raw_mode)}"
        mode = choice(raw_mode, SEARCH_MODES, refusal)
        context = self.number_arg("context", 0, hi=1000, integer=True)
        max_matches = self.number_arg("max_matches", 50, lo=1, hi=10_000, integer=True)
        selector = self.get_query_argument("execution", "current")
        records = store.all() if selector == "all" else [self.select(store, selector)]
        try:
            matcher = Matcher.build(query, mode, self.bool_arg("ignore_case", False))
        except SearchError as e:
            raise BadRequest(str(e)) from None
        for record in records:
            record.flush()
        logs = [(r.number, r.log(stream)) for r in records]
        try:
            result = await asyncio.to_thread(
                search_records,
                logs,
                matcher,
                context=context,
                max_matches=max_matches,
                timeout=SEARCH_TIMEOUT,
            )
        except SearchError as e:
            raise BadRequest(str(e)) from None
        one = records[0].number if selector != "all" else None
        reply = wire.SearchReply(
            query=query, mode=matcher.mode, stream=stream, execution=one, **result
        )
        self.reply(reply)
