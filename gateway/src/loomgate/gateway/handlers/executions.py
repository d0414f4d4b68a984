"""Endpoints for executions: submit, long-poll, list, stream reads, rich outputs, tracebacks,
input, search. Each is a function of the call, answering (status, body) or raising a Refusal."""

from __future__ import annotations

import asyncio

from loomgate.gateway.errors import BadRequest, NotFound
from loomgate.gateway.handlers.answers import Answer
from loomgate.gateway.handlers.call import MAX_LINES_INLINE, Call, choice, stream_name
from loomgate.gateway.handlers.record_views import execution_json, line_json
from loomgate.gateway.records.line_range import LineRange, LineRangeError
from loomgate.gateway.records.search import Matcher, SearchError, search_records
from loomgate.shared import wire
from loomgate.shared.echo import echo
from loomgate.shared.wire import SEARCH_MODES

SEARCH_TIMEOUT = 10.0


async def list_executions(call: Call) -> Answer:
    """GET kernels/{ref}/executions: summaries of executions after `since` and before `before`
    (at most `limit`, newest last), each with its first `head` and last `tail` lines."""
    store = call.registry.resolve_store(call.path["ref"])
    since = call.int_arg("since", 0)
    before = call.int_arg("before", None)
    limit = call.int_arg("limit", 100, lo=1, hi=10_000)
    output = call.output_args()
    records = [
        r for r in store.all() if r.number > since and (before is None or r.number < before)
    ][-limit:]
    executions = [execution_json(r, output) for r in records]
    return 200, wire.ExecutionList(executions=executions)


# The cell, the wait and the output it answers with, and who sends it.
SUBMIT_FIELDS = frozenset({"code", "wait", "until_silent", "head", "tail", "max_chars", "client"})


async def submit(call: Call) -> Answer:
    """POST kernels/{ref}/executions {code}: 201 with the record (after an optional wait), 409
    when busy."""
    code = call.body.get("code")
    if not isinstance(code, str):
        raise BadRequest("code (a string) is required")
    kernel = call.registry.resolve(call.path["ref"])
    output = call.output_args()
    record = await kernel.executions.submit(code, call.client_arg())
    reason = await call.wait_for(record)
    return 201, wire.ExecutionReply(execution=execution_json(record, output), returned=reason)


async def follow(call: Call) -> Answer:
    """GET kernels/{ref}/executions/{selector}: the record, after waiting as `wait` and
    `until_silent` ask."""
    store = call.registry.resolve_store(call.path["ref"])
    record = call.select(store, call.path["selector"])
    output = call.output_args()
    reason = await call.wait_for(record)
    return 200, wire.ExecutionReply(execution=execution_json(record, output), returned=reason)


async def read_stream(call: Call) -> Answer:
    """GET …/executions/{selector}/streams/{stream}?lines=a:b&max_chars=N: the lines of the
    stream in the range, with the stream's total line count."""
    name = stream_name(call.path["stream"])
    record = call.select(call.registry.resolve_store(call.path["ref"]), call.path["selector"])
    try:
        line_range = LineRange.parse(call.text_arg("lines"))
    except LineRangeError as e:
        raise BadRequest(str(e)) from None
    max_chars = call.int_arg("max_chars", None, lo=1)
    log = record.log(name)
    total = log.total
    lo, hi = line_range.resolve(total)
    if hi - lo > MAX_LINES_INLINE:
        hi = lo + MAX_LINES_INLINE
    lines = log.read(lo, hi)
    return 200, wire.StreamRead(
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


async def rich(call: Call) -> Answer:
    """GET …/executions/{selector}/rich/{index}: one rich output's MIME bundle ({data,
    metadata}) and where it sits in `combined`."""
    record = call.select(call.registry.resolve_store(call.path["ref"]), call.path["selector"])
    index = call.path["index"]
    try:
        bundle = record.rich.bundle(int(index))
    except (KeyError, ValueError):
        count = len(record.rich.entries)
        raise NotFound(
            f"execution {record.number} has no rich output {index}; it has {count}"
        ) from None
    entry = record.rich.entries[int(index)]
    return 200, wire.RichBundle(
        number=record.number, **entry, data=bundle["data"], metadata=bundle["metadata"]
    )


async def traceback(call: Call) -> Answer:
    """GET …/executions/{selector}/traceback: the traceback with the kernel's ANSI colours (404
    when the execution raised nothing)."""
    record = call.select(call.registry.resolve_store(call.path["ref"]), call.path["selector"])
    text = record.coloured_traceback()
    if text is None:
        raise NotFound(f"execution {record.number} raised no error")
    return 200, wire.ColouredTraceback(number=record.number, text=text)


async def answer_input(call: Call) -> Answer:
    """POST …/executions/{selector}/input {value}: answer a pending input(); 409 when that
    execution is not waiting for input."""
    value = call.body.get("value")
    if not isinstance(value, str):
        raise BadRequest("value (a string) is required")
    kernel = call.registry.resolve(call.path["ref"])
    record = call.select(kernel.store, call.path["selector"])
    kernel.executions.answer_input(record, value)
    return 200, wire.ExecutionOnly(execution=record.summary())


async def search(call: Call) -> Answer:
    """GET kernels/{ref}/search: matching lines grouped with their context, per execution, in
    one execution or all of them."""
    store = call.registry.resolve_store(call.path["ref"])
    query = call.text_arg("query")
    if not query:
        raise BadRequest("query is required")
    stream = stream_name(call.text_arg("stream", "combined"))
    raw_mode = call.text_arg("mode", "auto")
    refusal = f"mode must be auto, literal or regex, not {echo(raw_mode)}"
    mode = choice(raw_mode, SEARCH_MODES, refusal)
    context = call.int_arg("context", 0, hi=1000)
    max_matches = call.int_arg("max_matches", 50, lo=1, hi=10_000)
    selector = call.text_arg("execution", "current")
    records = store.all() if selector == "all" else [call.select(store, selector)]
    try:
        matcher = Matcher.build(query, mode, call.bool_arg("ignore_case", False))
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
    reply = wire.SearchReply(query=query, mode=matcher.mode, stream=stream, execution=one, **result)
    return 200, reply
