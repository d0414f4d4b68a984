"""A profile's values as sandbox.toml writes them (paths, names, sizes, counts), each checked, with
the error naming the profile, key and line."""

from __future__ import annotations

from collections.abc import Callable

from loomgate.gateway.sandbox.policy.profiles import written_path_problem
from loomgate.gateway.sandbox.policy.protected_names import (
    DEFAULT_PROTECTED,
    GIT,
    protected_name,
    protected_name_problem,
)
from loomgate.gateway.sandbox.policy.toml_lines import TomlLines
from loomgate.shared.sizes import parse_size

__all__ = ["Fail", "memory", "names", "paths", "processes", "unprotected_problem"]


# Makes the error a bad value raises, from its sentence and line (config.SandboxConfigError).
Fail = Callable[[str, "int | None"], Exception]


def paths(name: str, key: str, value: object, lines: TomlLines, fail: Fail) -> tuple[str, ...]:
    """Return a `writable`/`hidden` list as written, each path checked."""
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise fail(
            f"profile {name!r}: {key!r} must be a list of paths in quotes "
            f'(e.g. {key} = ["{{cwd}}", "~/.cache/pip"])',
            lines.key("profiles", name, key),
        )
    for item in value:
        problem = written_path_problem(item)
        if problem is not None:
            raise fail(
                f"profile {name!r}: {key}: {problem}", lines.item("profiles", name, key, item)
            )
    return tuple(value)


def names(name: str, key: str, value: object, lines: TomlLines, fail: Fail) -> tuple[str, ...]:
    """Return a `protected`/`unprotected` list: names relative to each writable dir, those
    taken out each one of the defaults."""
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise fail(
            f"profile {name!r}: {key!r} must be a list of names in quotes, each relative to "
            f'every writable directory (e.g. {key} = [".envrc", ".github/workflows"])',
            lines.key("profiles", name, key),
        )
    for item in value:
        problem = protected_name_problem(item)
        if problem is None and key == "unprotected":
            problem = unprotected_problem(protected_name(item))
        if problem is not None:
            raise fail(
                f"profile {name!r}: {key}: {problem}", lines.item("profiles", name, key, item)
            )
    return tuple(protected_name(item) for item in value)


def unprotected_problem(item: str) -> str | None:
    """Return why a well-formed name cannot be taken out of the protected ones (None: it can)."""
    if item == GIT:
        return (
            f"{item!r} is always read-only (its hooks and config run outside): "
            "it cannot be taken out"
        )
    if item not in DEFAULT_PROTECTED:
        return (
            f"{item!r} is not protected by default, so it cannot be taken out "
            f"(the defaults: {', '.join(DEFAULT_PROTECTED)})"
        )
    return None


def memory(name: str, value: object, line: int | None, fail: Fail) -> int | None:
    """Return a `memory` value in bytes: a size, or None for false/"none" (no limit)."""
    if value is False or value == "none":
        return None
    if value is True or not isinstance(value, int | str):
        raise fail(
            f'profile {name!r}: \'memory\' must be a size (e.g. "4GiB", "512MiB" or a number '
            "of bytes), or false for no limit",
            line,
        )
    try:
        return parse_size(value)
    except ValueError as e:
        raise fail(f"profile {name!r}: 'memory': {e}", line) from None


def processes(name: str, value: object, line: int | None, fail: Fail) -> int | None:
    """Return a `processes` value: a positive number, or None for false/"none" (no limit)."""
    if value is False or value == "none":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(
            f"profile {name!r}: 'processes' must be a positive number (processes and threads "
            "together, e.g. 512), or false for no limit",
            line,
        )
    return value
