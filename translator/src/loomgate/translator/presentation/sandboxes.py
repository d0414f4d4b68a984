"""A kernel's sandbox as it reads: its profile in a word, its rules, and the rule a cell broke."""

from __future__ import annotations

from loomgate.shared import wire
from loomgate.shared.sizes import format_size

# How a profile with no confinement is named (docs/protocol.md: `profile` "none").
UNCONFINED = "none"
NOT_SANDBOXED = "not sandboxed by loomgate"
# Before what a sandbox's mechanism cannot give its kernel ("its own /tmp; …").
LACKS_LEAD = "this mechanism cannot give it"


def format_processes(count: int) -> str:
    """Return a process limit: "512 processes", "1 process"."""
    return f"{count:,} process" + ("" if count == 1 else "es")


def network_words(network: bool | str | list[str]) -> str:
    """Return what a sandbox's network reaches: "every public address", "no network", "the
    host's network", "pypi.org, *.github.com"."""
    if isinstance(network, list):
        return ", ".join(network) if network else "no network"
    if network == "host":
        return "the host's network"
    return "every public address" if network is True else "no network"


def sandbox_summary(sandbox: wire.Sandbox | None) -> str:
    """Return a kernel's sandbox in a few words: "workspace", "strict (no network)", "none",
    or that loomgate did not start it under a profile."""
    if sandbox is None:
        return NOT_SANDBOXED
    profile, network = sandbox["profile"], sandbox["network"]
    if profile != UNCONFINED and network is not True:
        return f"{profile} ({network_words(network)})"
    return profile


def sandbox_clause(kernel: wire.Kernel) -> str:
    """Return "; sandbox: workspace" for a kernel with a sandbox ("" for one without)."""
    sandbox = kernel.get("sandbox")
    return f"; sandbox: {sandbox_summary(sandbox)}" if sandbox is not None else ""


def sandbox_lines(sandbox: wire.Sandbox | None) -> list[str]:
    """Return a kernel's sandbox for its status: the profile and how it is enforced, then its
    rules (writable, hidden, network, memory, processes)."""
    if sandbox is None:
        return [f"sandbox: {NOT_SANDBOXED}"]
    profile = sandbox["profile"]
    if profile == UNCONFINED:
        return [f"sandbox: {UNCONFINED} (not confined)"]
    mechanism = f", enforced by {sandbox['mechanism']}" if sandbox["mechanism"] else ""
    hidden = len(sandbox["hidden"])
    limits = [
        f"network: {network_words(sandbox['network'])}",
        "memory: "
        + (format_size(sandbox["memory"]) if sandbox["memory"] is not None else "no limit"),
        "processes: "
        + (f"{sandbox['processes']:,}" if sandbox["processes"] is not None else "no limit"),
    ]
    lacks = sandbox.get("lacks") or []  # absent from a gateway before mechanisms said it
    return [
        f"sandbox: {profile}{mechanism}",
        f"  writable: {writable_places(sandbox)}",
        f"  hidden: {hidden:,} path" + ("" if hidden == 1 else "s"),
        "  " + "; ".join(limits),
        *([f"  {LACKS_LEAD}: " + "; ".join(lacks)] if lacks else []),
    ]


def mechanism_lines(info: wire.Info) -> list[str]:
    """Return the sandbox mechanism a gateway's kernels run under, what it cannot give them and
    why each stronger one is not used (or that none works here, and why)."""
    if info.get("upstream"):
        return ["sandbox: none (the upstream starts the kernels)"]
    mechanism = info.get("sandbox_mechanism")
    reasons = info.get("sandbox_refused") or []
    lines = [f"sandbox: {mechanism}" if mechanism else "sandbox: no mechanism works here"]
    lines += [f"  {'not used' if mechanism else 'refused'}: {reason}" for reason in reasons]
    lacks = info.get("sandbox_lacks") or []
    if lacks:
        lines.append(f"  {LACKS_LEAD}: " + "; ".join(lacks))
    return lines


def writable_places(sandbox: wire.Sandbox) -> str:
    """Return where a sandboxed kernel may write: its writable paths and its own /tmp."""
    if not sandbox["writable"]:
        return "only its own /tmp"
    return ", ".join(sandbox["writable"]) + " and its own /tmp"


def sandbox_rule_line(failure: wire.SandboxFailure, sandbox: wire.Sandbox | None) -> str:
    """Return the one line saying which rule of which profile a failed cell ran into, so that
    the reader stops retrying; `sandbox` (the kernel's, when known) adds the limit or the
    places it may write."""
    profile, path = failure["profile"], failure["path"]
    rules = sandbox if sandbox is not None and sandbox["profile"] == profile else None
    rule = failure["rule"]
    if rule == "hidden":
        what = path or "The cell read a path that"
        return f"{what} is hidden from this kernel by its sandbox ({profile})."
    if rule == "read_only":
        what = (
            f"{path} is not writable from this kernel"
            if path
            else "the cell wrote where this kernel may not write"
        )
        if rules is None:
            where = "only in its working directory, its own /tmp and what its profile adds"
        elif rules["writable"]:
            where = "in " + writable_places(rules)
        else:
            where = "only in its own /tmp"
        return f"Sandbox ({profile}): {what}; it may write {where}."
    if rule == "protected":
        what = path or "What the cell wrote"
        return (
            f"{what} is kept read-only by this kernel's sandbox ({profile}), also before it "
            "exists: programs outside the sandbox act on it later (git, editors, agents' hosts, "
            "the Python environment it runs on); only the person can take a name out."
        )
    if rule == "own_tmp":
        what = f"{path}: the" if path else "The"
        return (
            f"{what} host's /tmp is not visible here; this kernel's /tmp is its own "
            f"(sandbox {profile})."
        )
    if rule == "network":
        network = rules["network"] if rules is not None else None
        if network is False or network == []:
            return f"This kernel's sandbox ({profile}) has no network."
        reaches = f"it reaches {network_words(network)}" if network is not None else "its rule"
        if path:
            return (
                f"This kernel's sandbox ({profile}) refused the connection to {path}: "
                f"{reaches}, and loopback, private, link-local and this host's own addresses "
                "only when the profile names them (the person names them in sandbox.toml's "
                "network)."
            )
        return (
            f"This kernel ({profile}) reaches the network only through its proxy (HTTP_PROXY, "
            f"HTTPS_PROXY, ALL_PROXY; {reaches}): a raw socket reaches nothing, not even the "
            "host's loopback."
        )
    if rule == "memory":
        memory = rules["memory"] if rules is not None else None
        limit = f" ({format_size(memory)})" if memory is not None else ""
        return (
            f"The kernel reached its memory limit{limit}, set by its sandbox ({profile}); a cell "
            "must use less memory (only the person can choose a profile with a higher limit)."
        )
    processes = rules["processes"] if rules is not None else None
    limit = f" ({format_processes(processes)})" if processes is not None else ""
    return (
        f"The kernel reached its process limit{limit}, set by its sandbox ({profile}); a cell "
        "must start fewer processes (only the person can choose a profile with a higher limit)."
    )
