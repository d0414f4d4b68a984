"""Invalid tool arguments as one sentence, instead of pydantic's multi-line report."""

from __future__ import annotations

import re
from typing import Any

from mcp.server.context import CallNext, ServerRequestContext

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
