"""The sentences of the MCP Apps execution view's tools (the app shows them to the person)."""

from __future__ import annotations


def app_only_refusal(tool: str) -> str:
    """Return why an app-only tool was refused: the client did not negotiate MCP Apps."""
    return (
        f"{tool} serves loomgate's execution view inside an MCP Apps host; this client did not "
        "negotiate the MCP Apps extension (io.modelcontextprotocol/ui)."
    )


def not_running_refusal(number: int, state: str | None) -> str:
    """Return why the view's interrupt did nothing: In [`number`] is no longer running (or has
    not started: `state` None)."""
    if state is None:
        return f"In [{number}] is not running; nothing was interrupted."
    return (
        f"In [{number}] is not running (it is {state.replace('_', ' ')}); nothing was interrupted."
    )


def view_summary(number: int, state: str) -> str:
    """Return the one line an app tool's result carries beside its data."""
    return f"In [{number}]: {state.replace('_', ' ')}"
