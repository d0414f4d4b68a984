"""Which kernels a model may use, in words: a kernel closed to agents, the refusal of a model's
call on one, and what `loomgate agents open|close` did."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loomgate.shared import wire

OPEN_COMMAND = "loomgate agents open"


def label_of(kernel: wire.Kernel) -> str:
    """Return the name a person gives the CLI for `kernel` (its name, else its id's start)."""
    return kernel["name"] or kernel["id"][:8]


def closed_line(kernel: wire.Kernel) -> list[str]:
    """Return the status line of a kernel closed to agents ([] for one open to them, or from a
    gateway before it said so)."""
    if kernel.get("open_to_agents", True):
        return []
    return [f"open to agents: no (`{OPEN_COMMAND} {label_of(kernel)}`)"]


def closed_note(kernels: Sequence[wire.Kernel]) -> list[str]:
    """Return the table's footer naming the live kernels closed to agents ([] when none is)."""
    closed = [label_of(k) for k in kernels if not k.get("open_to_agents", True) and k["alive"]]
    if not closed:
        return []
    return [
        f"not open to agents: {', '.join(closed)} (only the person opens one: "
        f"`{OPEN_COMMAND} KERNEL`)"
    ]


def opened_line(kernel: wire.Kernel) -> str:
    """Return what `loomgate agents open|close` did: the kernel is open to agents, or not."""
    if kernel.get("open_to_agents", False):
        return (
            f"kernel {label_of(kernel)} is open to agents: a model may use it whatever its sandbox"
        )
    return f"kernel {label_of(kernel)} is closed to agents"


def closed_to_agents_refusal(details: Mapping[str, object]) -> str:
    """Return why the model may not use a kernel (the gateway's refusal `details`: its label,
    profile and the default): it is not open to agents, and only the person opens it."""
    label, profile, default = details.get("kernel"), details.get("profile"), details.get("default")
    runs = (
        f"runs under the sandbox profile {profile}, looser than this gateway's default ({default})"
        if profile is not None
        else "is not sandboxed by loomgate"
    )
    return (
        f"Kernel {label} {runs}, so a model may not use it; only the person opens it to agents "
        f'(`{OPEN_COMMAND} {label}`). connect(kernel="a-new-name") starts a kernel of '
        "your own."
    )
