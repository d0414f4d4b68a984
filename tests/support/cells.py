"""Cells as tests run them: submitting code to a gateway's kernel, the texts of the lines it
printed, and a picture for a cell to display."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

import httpx

KERNELS = "/api/loomgate/kernels"

# A 1×1 PNG: base64, as a cell's display data carries it, and decoded.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAC"
    "hwGA60e6kgAAAABJRU5ErkJggg=="
)
PNG_BYTES = base64.b64decode(PNG)
# An 8×8 PNG (base64), for a page to show at a size it can measure.
PNG_8X8 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAgAAAAICAIAAABLbSncAAAAEklEQVR4nGP4z8CAFWEXHbQSACj/P8Fu7N9h"
    "AAAAAElFTkSuQmCC"
)


async def submit(http: httpx.AsyncClient, kernel: str, code: str, **body: Any) -> dict[str, Any]:
    """Submit `code` to `kernel`, waiting up to 60 s for its end unless `body` says otherwise
    (`body` adds or overrides the request's fields); return the reply."""
    r = await http.post(f"{KERNELS}/{kernel}/executions", json={"code": code, "wait": 60, **body})
    assert r.status_code == 201, r.text
    reply: dict[str, Any] = r.json()
    return reply


async def run(http: httpx.AsyncClient, kernel: str, code: str, **body: Any) -> dict[str, Any]:
    """Run `code` on `kernel` as `submit` does, with up to 1,000 of its first output lines;
    return the execution."""
    execution: dict[str, Any] = (await submit(http, kernel, code, **{"head": 1000, **body}))[
        "execution"
    ]
    return execution


def texts(lines: Iterable[Any]) -> list[str]:
    """Return each line's text: a wire line's `"text"`, or a stored line's `.text`."""
    return [line["text"] if isinstance(line, Mapping) else line.text for line in lines]


def output_texts(execution: Mapping[str, Any]) -> list[str]:
    """Return the texts of an execution's combined output lines (its head, then its tail)."""
    return texts([*execution["output"]["head"], *execution["output"]["tail"]])
