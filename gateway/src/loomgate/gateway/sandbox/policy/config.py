"""sandbox.toml: the person's profiles and defaults, read and checked with errors that name the
file and line."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from loomgate.gateway.sandbox.network.network_rules import parse_network
from loomgate.gateway.sandbox.policy.profile_values import memory, names, paths, processes
from loomgate.gateway.sandbox.policy.profiles import (
    ALWAYS_HIDDEN,
    BUILT_IN,
    SandboxProfile,
)
from loomgate.gateway.sandbox.policy.toml_lines import TomlLines
from loomgate.shared.paths import config_dir

__all__ = [
    "SANDBOX_FILE",
    "SandboxConfig",
    "SandboxConfigError",
    "UnknownProfile",
    "load_sandbox_config",
    "sandbox_file",
]

SANDBOX_FILE = "sandbox.toml"
TOP_KEYS = ("default", "jupyter_api", "jupyter_api_open_to_agents", "profiles")
PROFILE_KEYS = (
    "extends",
    "writable",
    "hidden",
    "protected",
    "unprotected",
    "readable",
    "network",
    "memory",
    "processes",
)
DEFAULT = "workspace"  # for kernels created through loomgate
JUPYTER_API = "none"  # for kernels started through the standard Jupyter API
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")


class SandboxConfigError(ValueError):
    """A sandbox.toml that cannot be used: `str()` is "PATH:LINE: what is wrong"."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")
        self.path = path
        self.line = line
        self.message = message


class UnknownProfile(ValueError):
    """A profile name no built-in and no sandbox.toml defines."""


Fail = Callable[[str, "int | None"], SandboxConfigError]


@dataclass(frozen=True)
class SandboxConfig:
    """The profiles a gateway knows (built-ins overlaid by sandbox.toml) and its defaults."""

    default: str = DEFAULT
    jupyter_api: str = JUPYTER_API
    profiles: Mapping[str, SandboxProfile] = field(default_factory=lambda: BUILT_IN)
    path: Path | None = None  # the file read; None when there is none
    # Whether a model may use kernels started through the standard Jupyter API (the person's
    # notebooks) whatever their profile: the person's explicit choice.
    jupyter_api_open_to_agents: bool = False

    def profile(self, name: str) -> SandboxProfile:
        """Return profile `name` (UnknownProfile, naming the known ones, if there is none)."""
        found = self.profiles.get(name)
        if found is None:
            known = ", ".join(sorted(self.profiles))
            where = f" in {self.path}" if self.path is not None else f" in {sandbox_file()}"
            raise UnknownProfile(
                f"There is no sandbox profile {name!r}: the profiles are {known} "
                f"(define others{where})."
            )
        return found


def sandbox_file() -> Path:
    """Return the path of sandbox.toml in the config dir ($XDG_CONFIG_HOME/loomgate)."""
    return config_dir() / SANDBOX_FILE


def load_sandbox_config(path: Path | None = None) -> SandboxConfig:
    """Return the sandbox config `path` (default: sandbox_file()) defines; the built-ins with
    default "workspace" when it does not exist; SandboxConfigError when it is malformed."""
    source = sandbox_file() if path is None else path
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        return SandboxConfig()
    except OSError as e:
        raise SandboxConfigError(source, None, f"cannot be read ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise SandboxConfigError(source, line, "is not UTF-8 text") from None
    return parse_sandbox_config(text, source)


def toml_loads(text: str) -> dict[str, Any]:
    """Return the TOML document `text` (tomllib; tomli on Python 3.10)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - only on 3.10
        import tomli as tomllib
    document: dict[str, Any] = tomllib.loads(text)
    return document


TOML_WHERE = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")


def syntax_error(text: str, error: ValueError) -> tuple[int, str]:
    """Return the line a TOML syntax error points at and what it says, with its column."""
    first = str(error).splitlines()[0] if str(error) else "invalid TOML"
    match = TOML_WHERE.search(first)
    reason = first[: match.start()] if match else first
    lineno = getattr(error, "lineno", None)
    colno = getattr(error, "colno", None)
    if match and match.group(1):
        lineno, colno = int(match.group(1)), int(match.group(2))
    if not isinstance(lineno, int):
        lineno = max(text.count("\n") + (0 if text.endswith("\n") else 1), 1)
    column = f" (column {colno})" if isinstance(colno, int) else " (at the end of the file)"
    return lineno, f"invalid TOML: {reason}{column}"


def parse_sandbox_config(text: str, path: Path) -> SandboxConfig:
    """Return the sandbox config `text` (the contents of `path`) defines."""
    try:
        document = toml_loads(text)
    except ValueError as e:  # tomllib.TOMLDecodeError
        at, message = syntax_error(text, e)
        raise SandboxConfigError(path, at, message) from None
    lines = TomlLines(text)

    def fail(message: str, line: int | None) -> SandboxConfigError:
        return SandboxConfigError(path, line, message)

    for key in document:
        if key not in TOP_KEYS:
            raise fail(
                f"unknown key {key!r} (allowed: {', '.join(TOP_KEYS)})", lines.top_level(key)
            )
    tables = document.get("profiles", {})
    if not isinstance(tables, dict):
        raise fail(
            "'profiles' must be a table of [profiles.NAME] tables", lines.top_level("profiles")
        )
    written: dict[str, dict[str, Any]] = {}
    for name, table in tables.items():
        line = lines.table("profiles", name)
        if not PROFILE_NAME.fullmatch(name):
            raise fail(
                f"profile name {name!r} is not allowed: use letters, digits, '-' and '_' "
                "(at most 40, starting with a letter or digit)",
                line,
            )
        if name == "none":
            raise fail(
                "profile 'none' is built in (no sandbox) and cannot be redefined; give your "
                "profile another name",
                line,
            )
        if not isinstance(table, dict):
            raise fail(f"profile {name!r} must be a table ([profiles.{name}])", line)
        for key in table:
            if key not in PROFILE_KEYS:
                raise fail(
                    f"profile {name!r} has an unknown key {key!r} "
                    f"(allowed: {', '.join(PROFILE_KEYS)})",
                    lines.key("profiles", name, key),
                )
        written[name] = table
    profiles = dict(BUILT_IN)
    for name in written:
        profiles[name] = build_profile(name, written, lines, fail, ())
    config = SandboxConfig(path=path, profiles=MappingProxyType(profiles))
    chosen: dict[str, str] = {}
    for key, fallback in (("default", DEFAULT), ("jupyter_api", JUPYTER_API)):
        value = document.get(key, fallback)
        if not isinstance(value, str):
            raise fail(f"{key!r} must be a profile's name in quotes", lines.top_level(key))
        if value not in profiles:
            known = ", ".join(sorted(profiles))
            raise fail(
                f"{key!r} names profile {value!r}, which is not defined (the profiles: {known})",
                lines.top_level(key),
            )
        chosen[key] = value
    opened = document.get("jupyter_api_open_to_agents", False)
    if not isinstance(opened, bool):
        raise fail(
            "'jupyter_api_open_to_agents' must be true or false",
            lines.top_level("jupyter_api_open_to_agents"),
        )
    return replace(
        config,
        default=chosen["default"],
        jupyter_api=chosen["jupyter_api"],
        jupyter_api_open_to_agents=opened,
    )


def build_profile(
    name: str,
    written: Mapping[str, Mapping[str, Any]],
    lines: TomlLines,
    fail: Fail,
    seen: tuple[str, ...],
) -> SandboxProfile:
    """Return profile `name` as `written` says, over the profile it extends (workspace unless
    it says otherwise); `seen`: the profiles extending it, to refuse a cycle."""
    table = written[name]

    def at(key: str) -> int | None:
        return lines.key("profiles", name, key)

    base_name = table.get("extends", DEFAULT)
    if not isinstance(base_name, str):
        raise fail(f"profile {name!r}: 'extends' must be a profile's name in quotes", at("extends"))
    if base_name == "none":
        raise fail(
            f"profile {name!r} cannot extend 'none', which is no sandbox; extend 'workspace' "
            "or 'strict'",
            at("extends"),
        )
    if base_name in written and base_name != name:
        if base_name in seen:
            chain = " → ".join((*seen[seen.index(base_name) :], name, base_name))
            raise fail(f"profiles extend each other in a circle ({chain})", at("extends"))
        base = build_profile(base_name, written, lines, fail, (*seen, name))
    elif base_name in BUILT_IN:
        base = BUILT_IN[base_name]
    else:
        known = ", ".join(sorted({*BUILT_IN, *written} - {"none"}))
        raise fail(
            f"profile {name!r} extends {base_name!r}, which is not defined (the profiles: {known})",
            at("extends"),
        )
    profile = replace(base, name=name)  # every base is confined: none is refused above
    if "writable" in table:
        profile = replace(profile, writable=paths(name, "writable", table["writable"], lines, fail))
    if "hidden" in table:
        profile = replace(profile, hidden=paths(name, "hidden", table["hidden"], lines, fail))
    if "protected" in table:
        protected = names(name, "protected", table["protected"], lines, fail)
        profile = replace(profile, protected=protected)
    if "unprotected" in table:
        unprotected = names(name, "unprotected", table["unprotected"], lines, fail)
        profile = replace(profile, unprotected=unprotected)
    if "readable" in table:
        readable = paths(name, "readable", table["readable"], lines, fail)
        outside = next((p for p in readable if not p.startswith("~/")), None)
        if outside is not None:
            raise fail(
                f"profile {name!r}: 'readable' names paths in your home dir (~/x), not "
                f"{outside!r}: the rest of the file system is readable already",
                lines.key("profiles", name, "readable"),
            )
        profile = replace(profile, readable=readable)
    if "network" in table:
        try:
            profile = replace(profile, network=parse_network(table["network"]))
        except ValueError as e:
            raise fail(f"profile {name!r}: 'network': {e}", at("network")) from None
    if "memory" in table:
        profile = replace(profile, memory=memory(name, table["memory"], at("memory"), fail))
    if "processes" in table:
        value = processes(name, table["processes"], at("processes"), fail)
        profile = replace(profile, processes=value)
    conflict = written_conflict(profile)
    if conflict is not None:
        key = "writable" if "writable" in table else "hidden"
        raise fail(f"profile {name!r}: {conflict}", at(key))
    return profile


def written_conflict(profile: SandboxProfile) -> str | None:
    """Return why a profile's writable paths can never hold, judged on the paths as written
    (the same root, `~`, `{cwd}` or `/`), None if none is seen; rules() checks the rest."""

    def parts(text: str) -> tuple[str, ...]:
        head, _, rest = text.partition("/")
        return (head or "/", *(p for p in rest.split("/") if p and p != "."))

    hidden = [parts(h) for h in (*ALWAYS_HIDDEN, *profile.hidden)]
    for text in profile.writable:
        mine = parts(text)
        if ".." in mine:
            continue
        if mine in (("~",), ("/",)):
            what = "your home directory" if mine == ("~",) else "the whole file system"
            return (
                f"writable path {text!r} is {what}: a kernel that may write there could change "
                "your shell's start-up files and run code outside its sandbox"
            )
        for h in hidden:
            # a hidden path with ".." is matched only by one with "..", skipped above
            if mine[: len(h)] == h:
                shown = "/" + "/".join(h[1:]) if h[0] == "/" else "/".join(h)
                return (
                    f"writable path {text!r} lies inside the hidden path {shown!r}: a kernel "
                    "cannot write where it cannot see"
                )
    return None
