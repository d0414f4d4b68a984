"""Which paths a Landlock ruleset allows, and what: Landlock only allows, and a right on a dir
holds for its whole tree, so a grant with hidden paths inside it is given instead to every entry
beside the way to each hidden path, walked from the grant down.

A dir on the way to a hidden path gets no right of its own: it can be entered and what the walk
granted in it used, but it cannot be listed, and nothing can be created or removed in it (a name
made there later has no right at all). A symlink gets no rule: its target has rules of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from loomgate.gateway.sandbox.policy.profiles import lies_inside

__all__ = ["entries", "on_the_way", "path_rules", "real"]

Children = Callable[[Path], Iterable[Path]]


def real(path: Path) -> Path:
    """Return `path` with every symlink of its existing part resolved (Landlock's rules are on
    real files; a hidden path not there yet is named where it would be)."""
    return Path(os.path.realpath(path))


def entries(directory: Path) -> list[Path]:
    """Return the entries of `directory` that are not symlinks (none when it cannot be
    listed: nothing in it is allowed then)."""
    try:
        with os.scandir(directory) as found:
            return [Path(e.path) for e in found if not e.is_symlink()]
    except OSError:
        return []


def path_rules(
    grants: Sequence[tuple[Path, int]],
    hidden: Sequence[Path],
    children: Children = entries,
) -> list[tuple[Path, int]]:
    """Return the (path, rights) rules that give each grant's rights beneath its path except
    beneath the hidden paths inside it. A grant inside a hidden path (the kernel's connection
    file in the runtime dir) holds there. Paths are taken as real ones (see `real`)."""
    rules: dict[Path, int] = {}
    for path, rights in grants:
        cuts = [h for h in hidden if h != path and lies_inside(h, path)]
        walk(path, rights, cuts, rules, children)
    return sorted(rules.items())


def walk(
    path: Path, rights: int, cuts: list[Path], rules: dict[Path, int], children: Children
) -> None:
    """Give `rights` beneath `path` but not beneath `cuts` (hidden paths inside it) to `rules`."""
    if not cuts:
        rules[path] = rules.get(path, 0) | rights
        return
    for child in children(path):
        if child in cuts:
            continue
        walk(child, rights, [c for c in cuts if lies_inside(c, child)], rules, children)


def on_the_way(grants: Sequence[Path], hidden: Sequence[Path]) -> list[Path]:
    """Return the dirs that lose rights of their own to the walk: each grant's path with a
    hidden path inside it, and the dirs between them (what cannot be listed, or written in
    when the grant is writable)."""
    found: dict[Path, None] = {}
    for path in grants:
        for inner in hidden:
            if inner == path or not lies_inside(inner, path):
                continue
            way = inner.parent
            while lies_inside(way, path):
                found[way] = None
                if way == path:
                    break
                way = way.parent
    return sorted(found)
