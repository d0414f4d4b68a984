"""Requests that cannot be done now, said so that the reader knows what to do instead."""

from __future__ import annotations

from collections.abc import Sequence

from loomgate.shared import wire
from loomgate.translator.presentation.audience import Audience


def busy_refusal(
    running: int | None, audience: Audience, setup: Sequence[str] | None = None
) -> str:
    """Return why a cell was not run: the kernel runs In [`running`], its `setup` parts, or
    (neither) a cell another client just sent."""
    if setup:
        names = ", ".join(setup)
        if audience == "model":
            return (
                f"The kernel is still running its setup ({names}); the cell was not run. "
                "Try again in a moment."
            )
        return f"the kernel is still running its setup ({names}); try again in a moment"
    if audience == "model":
        if running is None:
            return (
                "The kernel is busy starting another cell; the cell was not run. "
                "Try again in a moment."
            )
        return (
            f"The kernel is busy running In [{running}]; the cell was not run. "
            f"Use wait(execution={running}) to wait for it or interrupt() to stop it."
        )
    if running is None:
        return "the kernel is busy starting another cell; try again"
    return f"the kernel is busy running In [{running}]; wait for it or run `loomgate interrupt`"


def unknown_kernel_refusal(message: str, ref: str) -> str:
    """Return why a cell sent to the kernel `ref` was not run: no kernel has that name; a
    name (not a notebook path) is started by connect."""
    if "/" in ref or ref.endswith(".ipynb"):
        return f"{message}; list_kernels() shows the kernels and the notebooks they serve."
    return (
        f'{message}. connect(kernel="{ref}") starts a persistent kernel by that name; '
        "list_kernels() shows the running ones."
    )


def dismissed_dialog_note(number: int) -> str:
    """Return the note for an input dialog the person dismissed (the cell still waits)."""
    return (
        f"The input dialog was dismissed; In [{number}] still waits for input. "
        f'Answer with send_input(value="…", execution={number}) or interrupt().'
    )


# How an execution in each state is described after "it": "In [3] … ; it completed."
STATE_PHRASES: dict[str, str] = {
    "running": "is still running",
    "awaiting_input": "is waiting for input",
    "completed": "completed",
    "error": "ended with an error",
    "interrupted": "was interrupted",
    "killed": "was killed",
    "died": "died with its kernel",
    "lost": "was lost",
}


def not_waiting_for_input(number: int | None, state: str | None) -> str:
    """Return the refusal of an answer to an execution that is not waiting for input."""
    if number is None:
        return "No cell is waiting for input."
    phrase = STATE_PHRASES.get(state or "", f"is {state}")
    return f"In [{number}] is not waiting for input; it {phrase}."


def no_notebook_kernel(ref: str, gateway: str, audience: Audience) -> str:
    """Return why a notebook path names no kernel (it is never made a new kernel's name)."""
    lister = "list_kernels shows them" if audience == "model" else "`loomgate kernels` lists them"
    return (
        f"no kernel serves a notebook {ref!r} on {gateway} or on a Jupyter server of this "
        f"machine with loomgate's extension ({lister})"
    )


def several_kernels(
    ref: str, matches: Sequence[tuple[str, wire.Kernel]], audience: Audience
) -> str:
    """Return that `ref` names kernels on several Jupyter servers (gateway, kernel), and how to
    choose one."""
    listed = "; ".join(
        f"{kernel['name'] or kernel['id'][:8]} on {gateway}"
        + (f" ({', '.join(kernel['paths'])})" if kernel["paths"] else "")
        for gateway, kernel in matches
    )
    choose = (
        "pass gateway= to choose one"
        if audience == "model"
        else ("choose one with --gateway jupyter:PORT")
    )
    return f"{ref!r} names kernels on several Jupyter servers: {listed}; {choose}"


def stop_needs_force(kernel: wire.Kernel, ref: str) -> str | None:
    """Return why stop_kernel wants force=true for a live kernel someone else uses (a notebook
    open in a person's Jupyter, or one started on an upstream by someone else); None when it
    is loomgate's own to stop."""
    if not kernel["alive"]:
        return None
    if kernel["paths"]:
        whose = f"serves {', '.join(kernel['paths'])}, open in a person's Jupyter"
    elif kernel["attached"] is not None:
        whose = "was started on the upstream by someone else"
    else:
        return None
    label = kernel["name"] or kernel["id"][:8]
    return (
        f"kernel {label} {whose}; stopping it ends their session and variables. Call "
        f"stop_kernel(kernel={ref!r}, force=true) if that is what is wanted"
    )


def nothing_run_yet() -> str:
    """Return why a tool that looks at the conversation's kernel has none to look at yet."""
    return (
        "Nothing has run in this conversation yet: run_cell starts its kernel, and "
        "connect attaches to an existing one (list_kernels shows them)."
    )


def kernel_gone_refusal(kernel_id: str) -> str:
    """Return why a cell was not run: the conversation's kernel `kernel_id` no longer runs."""
    short = kernel_id[:8]
    return (
        f"This conversation's kernel {short} is no longer running (the gateway "
        "restarted, or the kernel was stopped), so its variables are gone; the cell "
        f"was not run. Its records stay readable with kernel={short!r}. Run the "
        "cell again to start a new kernel, or connect() to another."
    )


def stopped_kernel_refusal(kernel_id: str) -> str:
    """Return why connect cannot use the stopped kernel `kernel_id` named by its id."""
    short = kernel_id[:8]
    return (
        f"kernel {short} was stopped; its records stay readable with "
        f"read_output(kernel={short!r}, …); connect to a name to start a kernel"
    )


def nothing_to_interrupt() -> str:
    """Return the refusal of an interrupt when no cell runs."""
    return "Nothing is running on this kernel to interrupt."


def unexpected_failure(error: BaseException) -> str:
    """Return the one sentence for a failure loomgate-mcp did not foresee (a bug)."""
    return f"loomgate-mcp failed unexpectedly ({type(error).__name__}: {error})."


def looser_sandbox_refusal(
    profile: str, default: str | None, name: str, kernel_spec: str | None = None
) -> str:
    """Return why the model's kernel `name` (of `kernel_spec`, when asked) was not started under
    `profile`: it is looser than the gateway's `default` (None: not known), and only the person
    widens a sandbox."""
    than = f"this gateway's default ({default})" if default else "this gateway's default"
    spec = f" --kernel-spec {kernel_spec}" if kernel_spec else ""
    return (
        f"The sandbox profile {profile} is looser than {than}; only the person can widen a "
        f"kernel's sandbox (`loomgate run --kernel {name}{spec} --sandbox {profile}`, or "
        "sandbox.toml)."
    )


def sandbox_mismatch(kernel: wire.Kernel, asked: str, audience: Audience) -> str:
    """Return why a running kernel was not taken for a request to run under `asked`: its
    sandbox, fixed for its life, is another (or it has none of loomgate's)."""
    label = kernel["name"] or kernel["id"][:8]
    sandbox = kernel.get("sandbox")
    runs = (
        f"kernel {label} runs under the sandbox profile {sandbox['profile']}, fixed for its life"
        if sandbox is not None
        else f"kernel {label} is not sandboxed by loomgate"
    )
    if audience == "model":
        return (
            f"The {runs}; connect(kernel={label!r}) without sandbox attaches to it as it is, or "
            f"a new name starts a kernel under {asked}."
        )
    return f"{runs}; leave out --sandbox to use it as it is, or give --kernel a new name"


def unconfined_refusal(gateway: str, asked: str, audience: Audience) -> str:
    """Return why no kernel runs under `asked`: `gateway` ("the gateway at URL") started it
    without that profile (it predates sandboxes, or runs its kernels on an upstream), so it was
    stopped again."""
    if audience == "model":
        return (
            f"{gateway[:1].upper()}{gateway[1:]} does not run kernels under sandbox profiles, so "
            f"no kernel runs under {asked}; connect without sandbox for an unconfined kernel."
        )
    return (
        f"{gateway} does not run kernels under sandbox profiles, so no kernel runs under "
        f"{asked}; leave out --sandbox for an unconfined kernel"
    )
