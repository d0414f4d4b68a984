"""Asking the host's input dialog for a cell's pending input(), in both protocol eras."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from mcp.server.elicitation import AcceptedElicitation, render_elicitation_schema
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, Field

from loomgate.shared import wire
from loomgate.translator.client.gateway import GatewayClient
from loomgate.translator.presentation import input_dialog_message

log = logging.getLogger(__name__)


class InputValue(BaseModel):
    """What the input dialog asks the person for."""

    value: str = Field(description="the text to give to input()")


class NeedsInput(Exception):
    """The cell waits for input and the host answers through an input-required result."""

    def __init__(self, result: InputRequiredResult) -> None:
        super().__init__("input required")
        self.result = result


@dataclass(frozen=True)
class DialogState:
    """What a re-called tool needs to continue: the kernel, the execution, the time left."""

    ref: str
    number: int
    deadline_in: float

    def dumps(self) -> str:
        """Return the state as the request_state string the host sends back."""
        return json.dumps(
            {"kernel": self.ref, "execution": self.number, "deadline_in": self.deadline_in}
        )

    @classmethod
    def loads(cls, text: str, default_wait: float) -> DialogState:
        """Return the state a host sent back."""
        data = json.loads(text or "{}")
        deadline_in = max(0.0, float(data.get("deadline_in", default_wait)))
        return cls(str(data["kernel"]), int(data["execution"]), deadline_in)


def can_elicit(ctx: Context) -> bool:
    """Return whether the host declared a form input dialog (elicitation)."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


async def ask_host(
    ctx: Context, client: GatewayClient, ref: str, execution: wire.Execution, deadline: float
) -> bool:
    """Ask the host's input dialog for the pending input(); return whether it was answered.

    On a 2026-07-28 session this raises NeedsInput: the tool returns an input-required result
    and the host calls it again with the answer (see `host_answer`).
    """
    request = execution["input"]
    if request is None or request["password"] or not can_elicit(ctx):
        return False
    number = execution["number"]
    message = input_dialog_message(number, request["prompt"])
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        state = DialogState(ref, number, deadline - time.monotonic())
        raise NeedsInput(
            InputRequiredResult(
                input_requests={
                    "input": ElicitRequest(
                        params=ElicitRequestFormParams(
                            message=message,
                            requested_schema=render_elicitation_schema(InputValue),
                        )
                    )
                },
                request_state=state.dumps(),
            )
        )
    try:
        answer = await ctx.elicit(message=message, schema=InputValue)
    except MCPError as e:
        log.info("input dialog unavailable: %s", e)
        return False
    if not isinstance(answer, AcceptedElicitation):
        return False
    await client.send_input(ref, number, answer.data.value)
    return True


def host_answer(ctx: Context) -> str | None:
    """Return what the person typed in a re-called tool's dialog (None if it was dismissed)."""
    answer = (ctx.input_responses or {}).get("input")
    if answer is None or getattr(answer, "action", None) != "accept":
        return None
    return InputValue.model_validate(getattr(answer, "content", None)).value
