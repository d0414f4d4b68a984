"""Endpoints for executions: submit, status and long-poll, stream reads, rich outputs, input,
search."""

from __future__ import annotations

import asyncio

from loomgate.gateway.api import MAX_LINES_INLINE, LoomHandler, endpoint, line_json
from loomgate.gateway.errors import BadRequest, NotFound
from loomgate.gateway.record_store import search_records
from loomgate.shared.echo import echo
from loomgate.shared.line_range import LineRange, LineRangeError
from loomgate.shared.search import Matcher, SearchError
from loomgate.shared.wire import STREAMS

SEARCH_TIMEOUT = 10.0


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
            raise BadRequest(f"unknown stream {echo(stream)}; use one of {', '.join(STREAMS)}")
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
            raise BadRequest(f"unknown stream {echo(stream)}; use one of {', '.join(STREAMS)}")
        mode = self.get_query_argument("mode", "auto")
        if mode not in ("auto", "literal", "regex"):
            raise BadRequest(f"mode must be auto, literal or regex, not {echo(mode)}")
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
        self.finish({"query": query, "mode": matcher.mode, "stream": stream, **result})
