"""Invalid tool arguments as one sentence (not pydantic's multi-line report), unknown ones
refused rather than silently ignored, and an argument's former name taken as its current one."""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from mcp.server.context import CallNext, ServerMiddleware, ServerRequestContext

from loomgate.translator.mcp_server.results import failure

FIELD_ERROR = re.compile(r"^(\S[^\n]*)\n  ([^\n]+?) \[type=", re.M)


async def one_sentence_argument_errors(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> Any:
    """Return the call's result, with an argument-validation error rewritten as one sentence."""
    result = await call_next(ctx)
    if ctx.method != "tools/call" or not isinstance(result, dict) or not result.get("isError"):
        return result
    content = result.get("content") or [{}]
    text = str(content[0].get("text", ""))
    if " validation error" not in text.split("\n", 1)[0]:
        return result
    fields = "; ".join(f"{place}: {message}" for place, message in FIELD_ERROR.findall(text))
    name = (ctx.params or {}).get("name", "the tool")
    sentence = f"Invalid arguments for {name}: {fields or 'they do not match its schema'}."
    return {**result, "content": [{"type": "text", "text": sentence}]}


# Names a model reaches for that a tool spells otherwise.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "timeout": ("wait_seconds",),
    "timeout_seconds": ("wait_seconds",),
    "wait": ("wait_seconds",),
    "seconds": ("wait_seconds",),
    "id": ("execution", "kernel"),
    "execution_id": ("execution",),
    "number": ("execution",),
    "kernel_id": ("kernel",),
    "kernel_name": ("kernel",),
    "name": ("kernel",),
    "range": ("lines",),
    "line_range": ("lines",),
    "pattern": ("query",),
    "regex": ("query", "mode"),
    "text": ("query", "value", "code"),
    "source": ("code",),
    "input": ("value",),
}


# tool -> {former name: current name}: a host's saved call still works, though the schema
# names only the current one.
FORMER_NAMES: dict[str, dict[str, str]] = {
    "wait": {"timeout_seconds": "wait_seconds"},
}


def current_names(tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Return `arguments` with each former name of `tool`'s arguments renamed to its current
    one; one given under both names is left as it is, for the unknown one to be refused."""
    renamed = {}
    for name, value in arguments.items():
        current = FORMER_NAMES.get(tool, {}).get(name)
        renamed[current if current and current not in arguments else name] = value
    return renamed


async def former_names_accepted(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """Return the call's result, its arguments' former names taken as their current ones."""
    params = ctx.params or {}
    if ctx.method != "tools/call" or not isinstance(params.get("arguments"), Mapping):
        return await call_next(ctx)
    arguments = current_names(str(params.get("name")), params["arguments"])
    return await call_next(replace(ctx, params={**params, "arguments": arguments}))


def unknown_argument_refusal(tools: Sequence[Callable[..., Any]]) -> ServerMiddleware[Any]:
    """Return middleware that refuses a tool call with an argument its tool does not take."""
    takes = {
        fn.__name__: [name for name in inspect.signature(fn).parameters if name != "ctx"]
        for fn in tools
    }

    async def refuse_unknown_arguments(
        ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> Any:
        """Return the call's result, or a refusal naming the arguments the tool has."""
        params = ctx.params or {} if ctx.method == "tools/call" else {}
        known = takes.get(str(params.get("name")))
        unknown = [a for a in params.get("arguments") or {} if known is not None and a not in known]
        if not unknown or known is None:
            return await call_next(ctx)
        sentence = unknown_arguments_sentence(str(params["name"]), unknown, known)
        return failure(sentence)

    return refuse_unknown_arguments


def unknown_arguments_sentence(tool: str, unknown: list[str], known: list[str]) -> str:
    """Return the refusal of `unknown` arguments, with the likely meant ones and all `known`."""
    parts = []
    for name in unknown:
        meant = [m for m in SYNONYMS.get(name.lower(), ()) if m in known]
        meant = meant or difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" (did you mean {' or '.join(meant)}?)" if meant else ""
        parts.append(f"{name!r}{hint}")
    plural = "arguments" if len(unknown) > 1 else "argument"
    return (
        f"{tool} has no {plural} {', '.join(parts)}; nothing was run. It takes: {', '.join(known)}."
    )
