"""gateways.toml: named gateways, read and checked with errors that point at a line."""

from __future__ import annotations

import re
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loomgate.shared.echo import echo
from loomgate.shared.paths import config_dir
from loomgate.translator.client.errors import GatewayConfigError
from loomgate.translator.client.target import GatewayTarget, is_url

GATEWAYS_FILE = "gateways.toml"
GATEWAY_KEYS = ("url", "token_env", "token", "verify", "kind", "headers_env")
KINDS = ("loomgate", "jupyter")  # a loomgate gateway; a plain Jupyter server (upstream mode)


def gateways_file() -> Path:
    """Return the path of gateways.toml in the config dir ($XDG_CONFIG_HOME/loomgate)."""
    return config_dir() / GATEWAYS_FILE


def find_line(text: str, name: str, key: str | None = None) -> int | None:
    """Return the 1-based line of gateway `name`'s table header (or of its `key`), if found."""
    lines = text.splitlines()
    quoted = rf"(?:{re.escape(name)}|\"{re.escape(name)}\"|'{re.escape(name)}')"
    header = re.compile(rf"^\s*\[\s*gateways\s*\.\s*{quoted}\s*\]")
    start = next((i for i, line in enumerate(lines) if header.match(line)), None)
    if start is None:
        inline = re.compile(rf"^\s*(?:gateways\s*\.\s*)?{quoted}\s*=")
        found = next((i for i, line in enumerate(lines) if inline.match(line)), None)
        return None if found is None else found + 1
    if key is None:
        return start + 1
    key_line = re.compile(rf"^\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*=")
    for i in range(start + 1, len(lines)):
        if lines[i].lstrip().startswith("["):
            break
        if key_line.match(lines[i]):
            return i + 1
    return start + 1


def top_level_line(text: str, key: str) -> int | None:
    """Return the 1-based line where top-level `key` is set or opens a table, if found."""
    pattern = re.compile(rf"^\s*(?:\[+\s*)?(?:{re.escape(key)}|\"{re.escape(key)}\")\s*[=.\]]")
    return next((i + 1 for i, line in enumerate(text.splitlines()) if pattern.match(line)), None)


def decode_error_line(error: ValueError) -> int | None:
    """Return the line a TOML syntax error points at, if it says."""
    lineno = getattr(error, "lineno", None)
    if isinstance(lineno, int):
        return lineno
    match = re.search(r"line (\d+)", str(error))
    return int(match.group(1)) if match else None


def load_gateways_toml(path: Path) -> dict[str, GatewayTarget]:
    """Return the gateways `path` defines, by name (GatewayConfigError if the file is invalid).

    Entries with `token_env` carry it unresolved (token None): select_gateway reads the variable
    only for the gateway it selects.
    """
    # Imported here: only a named gateway needs the TOML parser, not a translator's start-up.
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise GatewayConfigError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = decode_error_line(e)
        reason = re.sub(r"\s*\(at line \d+, column \d+\)$", "", str(e).splitlines()[0])
        where = f"{path} line {line}" if line else str(path)
        raise GatewayConfigError(f"{where}: invalid TOML ({reason})") from None

    fail = ConfigFile(path, text).error
    unknown = sorted(set(document) - {"gateways"})
    if unknown:
        line = top_level_line(text, unknown[0])
        where = f"{path} line {line}" if line else str(path)
        raise GatewayConfigError(
            f"{where}: unknown key {unknown[0]!r} (expected only [gateways.NAME] tables)"
        )
    tables = document.get("gateways", {})
    if not isinstance(tables, dict):
        raise fail("'gateways' must be a table of [gateways.NAME] tables")
    targets: dict[str, GatewayTarget] = {}
    token_in_file = False
    for name, entry in tables.items():
        if not isinstance(entry, dict):
            raise fail(f"gateway {echo(name)} must be a table ([gateways.{name}])", name)
        targets[name] = parse_entry(name, entry, fail)
        token_in_file = token_in_file or "token" in entry
    if token_in_file and path.stat().st_mode & 0o077:
        warnings.warn(
            f"{path} holds a token but others can read it; run: chmod 600 {path}",
            UserWarning,
            stacklevel=2,
        )
    return targets


@dataclass(frozen=True)
class ConfigFile:
    """The text of a gateways.toml, for error messages that point at a line."""

    path: Path
    text: str

    def error(
        self, message: str, name: str | None = None, key: str | None = None
    ) -> GatewayConfigError:
        """Return an error naming the file and, when found, the line of gateway `name`/`key`."""
        line = find_line(self.text, name, key) if name is not None else None
        where = f"{self.path} line {line}" if line else str(self.path)
        return GatewayConfigError(f"{where}: {message}")


def parse_entry(
    name: str, entry: dict[str, Any], fail: Callable[..., GatewayConfigError]
) -> GatewayTarget:
    """Return the target one `[gateways.NAME]` table describes (raising `fail(...)` if invalid)."""
    for key in entry:
        if key not in GATEWAY_KEYS:
            allowed = ", ".join(GATEWAY_KEYS)
            raise fail(
                f"gateway {echo(name)} has an unknown key {key!r} (allowed: {allowed})", name, key
            )
    url = entry.get("url")
    if url is None:
        raise fail(f"gateway {echo(name)} needs a url", name)
    if not isinstance(url, str) or not is_url(url):
        message = f"the url of gateway {echo(name)} must be an http:// or https:// URL"
        raise fail(message, name, "url")
    for key in ("token", "token_env"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise fail(f"the {key} of gateway {echo(name)} must be a non-empty string", name, key)
    if "token" in entry and "token_env" in entry:
        raise fail(f"gateway {echo(name)} has both token and token_env; keep one", name, "token")
    verify = entry.get("verify", True)
    if not isinstance(verify, bool):
        raise fail(f"the verify of gateway {echo(name)} must be true or false", name, "verify")
    kind = entry.get("kind", "loomgate")
    if kind not in KINDS:
        raise fail(
            f"the kind of gateway {echo(name)} must be 'loomgate' or 'jupyter' (a Jupyter "
            "server, JupyterHub user server, Kernel Gateway or Enterprise Gateway)",
            name,
            "kind",
        )
    headers_env = entry.get("headers_env")
    if headers_env is not None and (kind != "jupyter" or not isinstance(headers_env, str)):
        raise fail(
            f"the headers_env of gateway {echo(name)} must be a variable name, and only a "
            "kind = 'jupyter' gateway takes it",
            name,
            "headers_env",
        )
    return GatewayTarget(
        url=url.rstrip("/"),
        token=entry.get("token"),
        verify=verify,
        name=name,
        local=False,
        token_env=entry.get("token_env"),
        upstream=kind == "jupyter",
        headers_env=headers_env,
    )
