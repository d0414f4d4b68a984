"""Checking a decoded JSON value against a type of shared/wire.py, strictly: every required key,
no unknown key, every literal and every nested shape."""

from __future__ import annotations

import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict


def mismatches(value: Any, expected: Any, where: str = "$") -> list[str]:
    """Return where `value` departs from the type `expected` (empty when it conforms)."""
    origin = get_origin(expected)
    if expected is Any or expected is object:
        return []
    if expected is None or expected is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if origin is Literal:
        return [] if value in get_args(expected) else [f"{where}: {value!r} not in {expected}"]
    if origin in (Union, types.UnionType):
        options = [mismatches(value, option, where) for option in get_args(expected)]
        if any(not found for found in options):
            return []
        return [f"{where}: {value!r} matches none of {expected}"]
    if is_typeddict(expected):
        return typeddict_mismatches(value, expected, where)
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        (item,) = get_args(expected)
        return [m for i, v in enumerate(value) for m in mismatches(v, item, f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        key_type, item = get_args(expected)
        return [
            m
            for k, v in value.items()
            for m in [
                *mismatches(k, key_type, f"{where} key"),
                *mismatches(v, item, f"{where}.{k}"),
            ]
        ]
    if expected is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not a number"]
    if expected is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{where}: {value!r} is not an integer"]
    if isinstance(expected, type):
        return [] if isinstance(value, expected) else [f"{where}: {value!r} is not {expected}"]
    raise TypeError(f"cannot check against {expected!r}")


def typeddict_mismatches(value: Any, shape: Any, where: str) -> list[str]:
    """Return where an object departs from the TypedDict `shape`."""
    if not isinstance(value, dict):
        return [f"{where}: {value!r} is not an object"]
    hints = get_type_hints(shape)
    problems = [f"{where}: missing {key!r}" for key in shape.__required_keys__ - value.keys()]
    problems += [f"{where}: unknown {key!r}" for key in value.keys() - hints.keys()]
    for key in value.keys() & hints.keys():
        problems += mismatches(value[key], hints[key], f"{where}.{key}")
    return problems
