"""Endpoints for a kernel's checkpoints: take, list, drop, and roll the kernel back to one
(SPEC §10). Each is a function of the call, answering (status, body) or raising a Refusal."""

from __future__ import annotations

from loomgate.gateway.errors import BadRequest
from loomgate.gateway.handlers.answers import Answer
from loomgate.gateway.handlers.call import Call
from loomgate.gateway.kernels import checkpoints
from loomgate.shared import wire


def text_field(call: Call, key: str, *, required: bool) -> str | None:
    """Return the body's text `key` (BadRequest when it is not text, or missing and required)."""
    value = call.body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{key} must be a string (a checkpoint's name)")
    return value


async def take(call: Call) -> Answer:
    """POST kernels/{ref}/checkpoints {"name"}: keep a frozen copy of the kernel's state under
    `name` (default `after-N`)."""
    kernel = call.registry.resolve(call.path["ref"])
    await kernel.settle()
    checkpoint, lacks = await checkpoints.take(kernel, text_field(call, "name", required=False))
    return 201, wire.CheckpointReply(checkpoint=checkpoint, kernel=kernel.model(), lacks=lacks)


async def listed(call: Call) -> Answer:
    """GET kernels/{ref}/checkpoints: the kernel's checkpoints, in the order they were taken,
    each one's memory measured now."""
    kernel = call.registry.resolve(call.path["ref"])
    await checkpoints.measure(kernel)
    return 200, wire.CheckpointsReply(checkpoints=checkpoints.listed(kernel))


async def drop(call: Call) -> Answer:
    """DELETE kernels/{ref}/checkpoints/{name}: end the checkpoint; answer those left."""
    kernel = call.registry.resolve(call.path["ref"])
    checkpoints.drop(kernel, call.path["name"])
    await kernel.save_resident()
    return 200, wire.CheckpointsReply(checkpoints=checkpoints.listed(kernel))


async def rollback(call: Call) -> Answer:
    """POST kernels/{ref}/rollback {"to"}: make the kernel's state the checkpoint's again."""
    kernel = call.registry.resolve(call.path["ref"])
    to = text_field(call, "to", required=True)
    assert to is not None
    checkpoint = await call.registry.rollback(kernel, to)
    return 200, wire.RollbackReply(kernel=kernel.model(), checkpoint=checkpoint)
