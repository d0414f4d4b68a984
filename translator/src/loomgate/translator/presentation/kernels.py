"""Kernels and executions as status lines and tables."""

from __future__ import annotations

import time
from collections.abc import Sequence

from loomgate.shared import wire
from loomgate.translator.jupyter_enable import ENABLE_HINT
from loomgate.translator.presentation.agent_access import closed_line, closed_note
from loomgate.translator.presentation.cells import (
    format_elapsed,
)
from loomgate.translator.presentation.checkpoints import checkpoint_lines
from loomgate.translator.presentation.sandboxes import (
    sandbox_clause,
    sandbox_lines,
    sandbox_summary,
)

# The word a person and a model read for a kernel state: the wire's `gone` is a stopped kernel
# (the event stream's phase is "stopped", and stop_kernel / `loomgate stop` stop it).
STATE_WORDS: dict[str, str] = {"gone": "stopped"}
# What a kernel's packages dir is, beside it in its status.
PACKAGES_NOTE = "%pip and !pip install here; first on sys.path, kept until the kernel is stopped"


def state_word(state: str) -> str:
    """Return how text names a kernel's wire `state` (`gone` reads "stopped")."""
    return STATE_WORDS.get(state, state)


def render_kernel(kernel: wire.Kernel, *, gateway: str) -> str:
    """Return one kernel's summary."""
    name = kernel["name"] or "(unnamed)"
    latest = kernel["last_execution"]
    lines = [
        f"Kernel {name} [{kernel['id'][:8]}] on {gateway}: {state_word(kernel['state'])}, "
        f"{kernel['lifetime']}, {kernel['kernel_spec'] or '?'}",
        f"executions: {kernel['executions']}" + (f" (latest In [{latest}])" if latest else ""),
    ]
    if kernel["current_execution"]:
        lines.append(f"running: In [{kernel['current_execution']}]")
    if kernel["cwd"]:
        lines.append(f"cwd: {kernel['cwd']}")
    sandbox = kernel.get("sandbox")  # absent from a gateway before sandboxes
    lines.extend(sandbox_lines(sandbox))
    packages = sandbox.get("packages") if sandbox is not None else None
    if packages:
        lines.append(f"packages: {packages} ({PACKAGES_NOTE})")
    if kernel["end_reason"]:
        lines.append(f"{'died' if kernel['ended'] else 'not taken back'}: {kernel['end_reason']}")
    lines += closed_line(kernel)
    lines += checkpoint_lines(kernel.get("checkpoints", []))  # absent: a gateway before them
    lines.append(f"connections: {kernel['connections']}")
    stops = stops_note(kernel, time.time())
    if stops is not None:
        lines.append(stops)
    return "\n".join(lines)


def stops_note(kernel: wire.Kernel, now: float) -> str | None:
    """Return when the gateway stops a kernel nobody holds (None for any other kernel)."""
    stops_at = kernel.get("stops_at")  # absent from a gateway before it said so
    if stops_at is None:
        return None
    if stops_at <= now:
        return "nobody holds it; it is stopped once its running cell ends"
    clock = time.strftime("%H:%M:%S", time.localtime(stops_at))
    return (
        f"nobody holds it; stopped at {clock} (in {format_elapsed(stops_at - now)}) unless a "
        "conversation takes it back"
    )


def render_kernels(
    kernels: Sequence[wire.Kernel], current: str | None, gateway: str, now: float | None = None
) -> str:
    """Return a table of kernels; `*` marks the one this conversation uses."""
    if not kernels:
        return f"No kernels on {gateway}."
    now = time.time() if now is None else now
    notebooks = any(kernel["paths"] for kernel in kernels)
    # The column only where some kernel has a sandbox (a Jupyter server's kernels have none).
    sandboxes = any(kernel.get("sandbox") is not None for kernel in kernels)
    rows: list[tuple[str, ...]] = [
        ("", "name", "id", "spec", "state", "lifetime", "runs", "idle", "conn")
    ]
    if sandboxes:
        rows[0] += ("sandbox",)
    if notebooks:
        rows[0] += ("notebook",)
    for kernel in kernels:
        last = kernel["last_activity"]
        row: tuple[str, ...] = (
            "*" if kernel["id"] == current else "",
            kernel["name"] or "-",
            kernel["id"][:8],
            kernel["kernel_spec"] or "-",
            state_word(kernel["state"]),
            kernel["lifetime"],
            str(kernel["executions"]),
            format_elapsed(now - last) if last else "-",
            str(kernel["connections"]),
        )
        if sandboxes:
            sandbox = kernel.get("sandbox")
            row += (sandbox_summary(sandbox) if sandbox is not None else "-",)
        rows.append(row + ((", ".join(kernel["paths"]) or "-",) if notebooks else ()))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    # The mechanism in force (a kernel an earlier gateway started may have had another).
    mechanisms = dict.fromkeys(
        sandbox["mechanism"]
        for kernel in kernels
        if (sandbox := kernel.get("sandbox")) is not None and sandbox["mechanism"]
    )
    footer = [f"sandboxes enforced by: {' | '.join(mechanisms)}"] if mechanisms else []
    footer += [
        f"{kernel_label(kernel)}: {note}"
        for kernel in kernels
        if (note := stops_note(kernel, now)) is not None
    ]
    footer += closed_note(kernels)
    return "\n".join([f"Kernels on {gateway}:", *table, *footer])


def render_unattached(kernels: Sequence[wire.UpstreamKernel], gateway: str) -> str:
    """Return the upstream's kernels that `gateway` does not record yet ("" when none)."""
    if not kernels:
        return ""
    rows = [("id", "spec", "state", "conn")] + [
        (k["id"][:8], k["kernel_spec"] or "-", k["state"], str(k["connections"])) for k in kernels
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    table = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    heading = (
        f"Running on {gateway}'s upstream, not recorded yet (connect to one by its id to attach "
        "it; its earlier cells have no records):"
    )
    return "\n".join([heading, *table])


def attached_note(kernel: wire.Kernel) -> str:
    """Return what to know of a kernel loomgate attached on an upstream ("" for its own)."""
    if kernel["attached"] is None:
        return ""
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(kernel["attached"]))
    return (
        f"Someone else started this kernel on the upstream; loomgate records it since {since} "
        "(earlier cells have no records; the In [N] numbering is the kernel's)."
    )


def render_jupyter_server(
    name: str,
    url: str,
    root_dir: str,
    kernels: Sequence[wire.Kernel] | None,
    current: str | None,
    problem: str = "",
) -> str:
    """Return a Jupyter server of the person's: its kernels, or why they cannot be reached."""
    where = f"Jupyter server {name} at {url}" + (f" (root {root_dir})" if root_dir else "")
    if problem:
        return f"{where}: {problem}"
    if kernels is None:
        return f"{where} has no loomgate extension; to reach its kernels: {ENABLE_HINT}."
    if not kernels:
        return f"{where}: no kernels."
    return render_kernels(kernels, current, name).replace(
        f"Kernels on {name}:", f"Kernels on {where}:", 1
    )


def serving(kernel: wire.Kernel) -> str:
    """Return " serving PATHS" for a kernel that notebooks or consoles use, else ""."""
    return f" serving {', '.join(kernel['paths'])}" if kernel["paths"] else ""


def kernel_label(kernel: wire.Kernel) -> str:
    """Return a kernel's name, or its short id."""
    return kernel["name"] or kernel["id"][:8]


def connected_note(kernel: wire.Kernel, gateway: str, *, created: bool) -> str:
    """Return the line that connect made (`created`) or attached to a kernel on `gateway`."""
    verb = "Created" if created else "Connected to"
    return (
        f"{verb} kernel {kernel_label(kernel)}{serving(kernel)} on {gateway} "
        f"({kernel['executions']} executions so far){sandbox_clause(kernel)}."
    )


def still_on_note(kernel: wire.Kernel | None) -> str:
    """Return the clause a failed connect ends with: the conversation's cells still go to
    `kernel`, in its language (None: it has none yet)."""
    if kernel is None:
        return (
            "no kernel is connected: the next run_cell starts one of the gateway's default "
            "kernel spec"
        )
    language = f" ({kernel['language']})" if kernel.get("language") else ""
    return f"this conversation's cells still go to kernel {kernel_label(kernel)}{language}"


def shared_kernel_note() -> str:
    """Return the note that a kernel of the person's Jupyter server is shared with them."""
    return (
        "This kernel belongs to a Jupyter server the person uses: their cells and yours "
        "share its variables and its In [N] numbering."
    )


def reset_note(kernel: wire.Kernel, killed: wire.Execution | None) -> str:
    """Return what a reset did: the variables gone, and the execution it `killed` (if any)."""
    lines = [
        f"Kernel {kernel_label(kernel)} was reset: its variables are gone; "
        "records and numbering are kept."
    ]
    if killed:
        lines.append(f"In [{killed['number']}] was running and was killed.")
    return "\n".join(lines)


def stopped_note(kernel: wire.Kernel) -> str:
    """Return the line that a kernel was stopped (its records stay)."""
    return f"Stopped kernel {kernel_label(kernel)}; its records stay readable."


def back_to_own_note(stopped: wire.Kernel, own: wire.Kernel) -> str:
    """Return the line that the conversation's current kernel was stopped and it is back on its
    own kernel (`own` alive), or that its own is gone too and what the next run_cell does."""
    label = kernel_label(own)
    if own["alive"]:
        last = own["last_execution"]
        ran = f"In [{last}] last" if last is not None else "nothing run in it yet"
        return (
            f"Stopped kernel {kernel_label(stopped)}; this conversation is back on its own "
            f"kernel {label} ({ran})."
        )
    return (
        f"Stopped kernel {kernel_label(stopped)}; this conversation's own kernel {label} was "
        "stopped too, so the next run_cell starts a new conversation kernel (its records stay "
        f"readable: read_output(kernel={own['id'][:8]!r}, execution=N))."
    )


STARTUP = "startup.py"
STARTUP_STEM = "startup."  # startup.py and a startup file of another language (startup.sh)
INSPECTORS = "inspectors.py"
# What a failed part means for the kernel, by part name.
SETUP_FAILED = {
    "startup.py": "startup.py failed; the kernel is usable without it:",
    "inspectors.py": "inspectors.py failed; no inspector checks this kernel's cells:",
}


def render_setup(results: Sequence[wire.SetupResult], *, outputs: bool = True) -> str:
    """Return what a kernel's setup printed (unless not `outputs`), how a part failed, and that
    a kernel of another language is not inspected ("" when there is nothing to say); a startup
    file for another language that this kernel skipped is not news."""
    out: list[str] = []
    ran_a_startup = any(
        r["name"].startswith(STARTUP_STEM) and r["state"] != "skipped" for r in results
    )
    for result in results:
        name = result["name"]
        if result["output"] and outputs:
            out += [f"{name} output:", result["output"]]
        if result["state"] == "failed":
            out += [SETUP_FAILED.get(name, f"{name} failed:"), result["failure"] or ""]
        elif result["state"] == "unfinished":
            out.append(f"{name} is {result['failure']}")
        elif result["state"] == "skipped" and name == INSPECTORS:
            out.append(f"This kernel's cells are not inspected: {result['failure']}.")
        elif result["state"] == "skipped" and name == STARTUP and not ran_a_startup:
            out.append(f"startup.py did not run: {result['failure']}.")
    return "\n".join(out)


def uninspected_refusal(refused: str, *, stopped: bool) -> str:
    """Return why a kernel was refused: it cannot run inspectors.py (the gateway's `refused`),
    and LOOMGATE_UNINSPECTED=refuse refuses such kernels (`stopped`: the one just started)."""
    end = "; the kernel started for this was stopped" if stopped else ""
    return (
        f"{refused}: LOOMGATE_UNINSPECTED=refuse refuses kernels whose cells would not be "
        f"inspected{end}"
    )


def installed_note(parts: Sequence[str]) -> str:
    """Return the note that a kernel made elsewhere now has the user's setup."""
    names = " and ".join(parts)
    pronoun = "it runs" if len(parts) == 1 else "they run"
    return f"Installed {names} in this kernel; {pronoun} again after every restart."


def replaced_note(gone: wire.Kernel) -> str:
    """Return the note that a stopped kernel's name went to a new kernel, its records stay."""
    short = gone["id"][:8]
    count = gone["executions"]
    records = "execution stays" if count == 1 else "executions stay"
    return (
        f"The earlier kernel named {gone['name']} ({short}) was stopped; its {count:,} "
        f"{records} readable: read_output(kernel={short!r}, execution=N) or "
        f"search_output(kernel={short!r}, …)."
    )


def started_note(name: str) -> str:
    """Return the note that --kernel named no kernel, so one was started under that name."""
    return f"Started a persistent kernel named {name}: --kernel named no running kernel."


def render_prewarmed(info: wire.Info) -> str:
    """Return a gateway's prewarmed kernels: how many each pool keeps, then a line per ready
    kernel saying which pool it is in and its own pid and memory."""
    if info["prewarm"] == 0:
        return "prewarmed: off (loomgate-gateway --prewarm N turns it on)"
    count = info["prewarm"]
    kept = (
        f"prewarmed: {count} idle kernel{'s' if count != 1 else ''} per kernel spec, sandbox "
        "profile and directory in use"
    )
    if not info["prewarmed"]:
        return f"{kept}; none ready yet (starting)"
    return "\n".join([f"{kept}:", *map(pooled_line, info["prewarmed"])])


def pooled_line(kernel: wire.PooledKernel) -> str:
    """Return one ready pool kernel's line: its pool, then its own pid and memory."""
    profile = kernel["sandbox"] if kernel["sandbox"] is not None else "started by the upstream"
    where = f"in {kernel['cwd']}" if kernel["cwd"] is not None else "any directory"
    facts = [f"pid {kernel['pid']}"] if kernel["pid"] is not None else []
    if kernel["rss_bytes"] is not None:
        facts.append(f"{kernel['rss_bytes'] / 1e6:.0f} MB")
    return f"  {kernel['kernel_spec']}, {profile}, {where}: {', '.join(facts) or 'ready'}"
