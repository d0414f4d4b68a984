"""The macOS sandbox: a `sandbox-exec` (Seatbelt, SBPL) profile generated from a kernel's rules.

Untested on macOS here (the tests read the generated text). In SBPL the last matching rule
decides, so the order below is the policy: writes are denied, then allowed in the writable
paths; what stays read-only inside them is denied after that, by its path, also before it
exists (`.git`, the protected names, the environments, every `__pycache__` and `node_modules`
at any depth); hidden paths are denied next (hidden wins inside writable); the kernel's own dirs
and files are allowed last (they may lie inside a hidden dir, as the state dir and the Jupyter
runtime dir are).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from loomgate.gateway.sandbox.policy.host_code import NODE_MODULES, PYCACHE, host_code
from loomgate.gateway.sandbox.policy.profiles import SandboxRules
from loomgate.gateway.sandbox.policy.protected_names import GIT

__all__ = ["SANDBOX_EXEC", "sandbox_exec_command", "sbpl_profile", "sbpl_string"]

SANDBOX_EXEC = "/usr/bin/sandbox-exec"
# Devices every process writes to (and /dev/fd/N, the stdio of `2>/dev/stderr`).
DEVICE_FILES = ("/dev/null", "/dev/zero", "/dev/tty", "/dev/dtracehelper", "/dev/urandom")
DEVICE_DIRS = ("/dev/fd",)
# Services through which something outside the sandbox acts for the kernel: opening apps and
# URLs (Launch Services) and the keychain (Security Server).
DENIED_SERVICES = (
    "com.apple.coreservices.launchservicesd",
    "com.apple.SecurityServer",
    "com.apple.securityd.xpc",
)
SYSLOG = "/private/var/run/syslog"


def sbpl_string(text: str) -> str:
    """Return `text` as an SBPL string literal (ValueError if it holds a control character)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ValueError(
            f"Path {text!r} holds a control character, which a macOS sandbox profile cannot "
            "name; rename it or choose profile 'none'."
        )
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def filters(kind: str, paths: Iterable[Path | str]) -> list[str]:
    """Return one `(kind "PATH")` filter line per absolute path (ValueError for a relative one)."""
    lines = []
    for path in paths:
        text = str(path)
        if not text.startswith("/"):
            raise ValueError(f"Path {text!r} is not absolute; the sandbox profile needs it so.")
        lines.append(f"  ({kind} {sbpl_string(text)})")
    return lines


def sbpl_regex(top: Path, tail: str) -> str:
    """Return a `(regex #"^TOP…")` filter line: `top` matched as it is, then the regex `tail`
    (its metacharacters escaped for the regex, then the whole for SBPL's string)."""
    sbpl_string(str(top))  # refuses control characters
    escaped = "".join(f"\\{c}" if c in "\\.[]{}()*+?^$|" else c for c in str(top))
    return f"  (regex #{sbpl_string('^' + escaped + tail)})"


def kept_read_only(rules: SandboxRules) -> list[str]:
    """Return the filters of what stays read-only inside the writable paths: each one's `.git`
    and protected names (a subpath: the name, and all beneath it, existing or not), the
    environments in it (its venvs, loomgate's), and every bytecode cache and node_modules."""
    paths = [top / name for top in rules.writable for name in (GIT, *rules.protected)]
    paths += [*rules.read_only, *(p for top in rules.writable for p in host_code(top).kept)]
    names = f"({PYCACHE}|{NODE_MODULES})"
    return filters("subpath", paths) + [
        sbpl_regex(top, f"/(.*/)?{names}(/|$)") for top in rules.writable
    ]


def rule(action: str, operations: str, lines: list[str]) -> list[str]:
    """Return `(action operations FILTER…)` over lines, or nothing when there is no filter."""
    if not lines:
        return []
    return [f"({action} {operations}", *lines[:-1], lines[-1] + ")"]


def sbpl_profile(
    rules: SandboxRules,
    *,
    temp_dir: Path,
    kernel_dir: Path,
    readable: Sequence[Path] = (),
    tcp_ports: Sequence[int] = (),
) -> str:
    """Return the SBPL profile text that confines a kernel to `rules`.

    `temp_dir`: the kernel's own temp dir; `kernel_dir`: its own dir (connection and ipc
    sockets), both readable and writable even inside a hidden path; `readable`: files inside
    hidden paths it still reads (its connection file); `tcp_ports`: the loopback ports a kernel
    that takes only TCP listens on (allowed without network too). Paths are used as given: pass them
    resolved (macOS's `/tmp` and `/var` are `/private/…`), as rules() makes its own.
    """
    if not rules.confined:
        raise ValueError(
            f"Profile {rules.profile!r} is not confined: run the kernel without sandbox-exec."
        )
    own = [temp_dir, kernel_dir]
    text = [
        "(version 1)",
        "(allow default)",
        ";; writes: only in the writable paths, the kernel's own dirs and the devices",
        "(deny file-write*)",
        *rule(
            "allow",
            "file-write*",
            filters("subpath", [*rules.writable, *own, *DEVICE_DIRS])
            + filters("literal", DEVICE_FILES),
        ),
        ";; what stays read-only inside them, also before it exists",
        *rule("deny", "file-write*", kept_read_only(rules)),
        ";; hidden: neither read nor written, even inside a writable path",
        *rule("deny", "file-read* file-write*", filters("subpath", rules.hidden)),
        ";; the kernel's own dirs and files, wherever they lie",
        *rule("allow", "file-read* file-write*", filters("subpath", own)),
        *rule("allow", "file-read*", filters("literal", readable)),
        ";; processes outside the sandbox: not signalled, inspected or controlled",
        "(deny signal)",
        "(allow signal (target same-sandbox))",
        "(deny process-info*)",
        "(allow process-info* (target same-sandbox))",
        "(deny mach-priv-task-port)",
        "(allow mach-priv-task-port (target same-sandbox))",
        ";; nothing outside runs code for the kernel: Apple events, Launch Services, keychain",
        "(deny appleevent-send)",
        *rule(
            "deny", "mach-lookup", [f"  (global-name {sbpl_string(s)})" for s in DENIED_SERVICES]
        ),
    ]
    if rules.network.off:
        text += [
            ";; no network; the kernel's own unix sockets (ZMQ ipc) and the system log stay",
            "(deny network*)",
            *rule(
                "allow",
                "network-bind network-inbound",
                [f"  (local unix-socket (subpath {sbpl_string(str(kernel_dir))}))"]
                + [f'  (local ip "localhost:{int(port)}")' for port in tcp_ports],
            ),
            *rule(
                "allow",
                "network-outbound",
                [
                    f"  (remote unix-socket (subpath {sbpl_string(str(kernel_dir))}))",
                    f"  (literal {sbpl_string(SYSLOG)})",
                ],
            ),
        ]
    return "\n".join(text) + "\n"


def sandbox_exec_command(profile_text: str, kernel_cmd: Sequence[str]) -> list[str]:
    """Return the argv that runs `kernel_cmd` under `profile_text` with sandbox-exec."""
    if not kernel_cmd:
        raise ValueError("The kernel command is empty: there is nothing to run in the sandbox.")
    return [SANDBOX_EXEC, "-p", profile_text, *kernel_cmd]
